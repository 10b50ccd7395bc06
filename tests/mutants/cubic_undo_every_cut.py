"""Mutant: CUBIC that undoes every cut a round trip later, as if each congestion event
had been spurious (RFC 9438 §4.9.2 allows the undo "once the previously declared
packet loss is confirmed to be spurious"): on real queue-overflow drops it returns to
the window the cut began from, and the overflow comes back at once.

On aioquic's CUBIC: the window (and W_max, ssthresh) before each new congestion event
is kept, and restored on the first acknowledgement a smoothed RTT after the cut.
"""

from aioquic.quic.congestion.cubic import CubicCongestionControl


class CubicUndoEveryCut(CubicCongestionControl):
    longlook_family = "cubic"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        self._saved = None  # (time of the cut, window, ssthresh, W_max) before it

    def on_packets_lost(self, *, now: float, packets) -> None:
        before = (now, self.congestion_window, self.ssthresh, self._W_max)
        started = self._congestion_recovery_start_time
        super().on_packets_lost(now=now, packets=packets)
        if self._congestion_recovery_start_time != started:  # a new congestion event
            self._saved = before

    def on_rtt_measurement(self, *, now: float, rtt: float) -> None:
        super().on_rtt_measurement(now=now, rtt=rtt)
        if self._saved is not None and now - self._saved[0] >= rtt:
            _, self.congestion_window, self.ssthresh, self._W_max = self._saved
            self._saved = None
