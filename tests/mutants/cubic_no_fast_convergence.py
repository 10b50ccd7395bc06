"""Mutant: CUBIC without fast convergence (RFC 9438 §4.7: the mechanism "SHOULD be
implemented"): at a congestion event W_max is always the window the event came at,
so after a cut from a window smaller than the last one the curve heads back for that
window, not for (1 + β_cubic) / 2 of it, and the flow gives bandwidth up slowly.

On aioquic's CUBIC, which lowers W_max in `on_packets_lost` when the window is below
it: after each new congestion event W_max is set back to the window before the cut.
"""

from aioquic.quic.congestion.cubic import CubicCongestionControl


class CubicNoFastConvergence(CubicCongestionControl):
    longlook_family = "cubic"

    def on_packets_lost(self, *, now: float, packets) -> None:
        before, started = self.congestion_window, self._congestion_recovery_start_time
        super().on_packets_lost(now=now, packets=packets)
        if self._congestion_recovery_start_time != started:  # a new congestion event
            self._W_max = before
