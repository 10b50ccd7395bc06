"""Mutant: the loss detector's time threshold is 9/32 of the RTT, with no floor: on a
sub-millisecond path a packet overtaken by its successors is declared lost before
kGranularity has passed (RFC 9002 §6.1.2: "this time threshold MUST be set to at least
the local timer granularity").

aioquic floors its RTT samples at 1 ms, which keeps 9/8 of them above kGranularity; a
quarter of kTimeThreshold takes the threshold under it. kTimeThreshold is a constant of
aioquic's recovery module, outside the controller, so the constructor patches it
(tests/mutants/_patch.py says why not at import).
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch


class EarlyTimeThreshold(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery, "K_TIME_THRESHOLD", 9 / 32)
