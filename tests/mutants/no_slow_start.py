"""Mutant: CUBIC that starts in congestion avoidance: ssthresh is the initial window
from the first packet, so the window grows by CUBIC's function (its TCP-friendly
region at first) rather than by the bytes acknowledged (RFC 9438 §4.10: CUBIC MUST
employ a slow-start algorithm when cwnd is no more than ssthresh; RFC 9002 §7.3.1).

Source: a controller whose ssthresh is initialised to the initial window instead of
infinity; the connection crawls for many round trips on any long-RTT path.
"""

from aioquic.quic.congestion.cubic import CubicCongestionControl


class NoSlowStart(CubicCongestionControl):
    longlook_family = "cubic"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        # The bug: no slow start, ever.
        self.ssthresh = self.congestion_window
