"""Not a bug: aioquic's CUBIC with RFC 9438 §4.8's first congestion avoidance after
a timeout planted in, which stock aioquic 1.7.2 lacks (docs/findings.md, F90): after
persistent congestion, the stage that follows slow start starts its curve at its own
first window (K = 0, W_max and W_est = that window), not at the W_max kept from
before the outage. The planted fix shows
test_cubic_regrows_from_the_window_it_restarts_with passes a sender that follows it.

aioquic sets up an epoch on the first ACK in congestion avoidance after a loss
(`_starting_congestion_avoidance`), taking K from its W_max, and after a collapse goes
on with the epoch it had (its t and K from before the outage). Asking for a new epoch
on the first ACK in congestion avoidance after a collapse, with W_max set to the
window then, makes K zero.
"""

from aioquic.quic.congestion.cubic import CubicCongestionControl


class CubicRestartAfterPc(CubicCongestionControl):
    longlook_family = "cubic"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        self._after_timeout = False

    def on_persistent_congestion(self) -> None:
        super().on_persistent_congestion()
        self._after_timeout = True

    def on_packets_lost(self, *, now: float, packets) -> None:
        # Stock aioquic takes ssthresh from the bytes still in flight once the lost
        # ones are out, so losing a whole flight in an outage leaves the window at
        # two datagrams before (or instead of) persistent congestion: a collapse too.
        super().on_packets_lost(now=now, packets=packets)
        if self.congestion_window <= 2 * self._max_datagram_size:
            self._after_timeout = True

    def on_packet_acked(self, *, now: float, packet) -> None:
        if self._after_timeout and self.ssthresh is not None and self.congestion_window >= self.ssthresh:
            # A new epoch from this window, whether or not the loss before the
            # collapse had already started one.
            self._W_max = self.congestion_window
            self._starting_congestion_avoidance = True
            self._after_timeout = False
        super().on_packet_acked(now=now, packet=packet)
