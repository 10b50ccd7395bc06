"""Mutant: the loss detector's time threshold is 2.5 RTT, not 9/8 (RFC 9002 §6.1.2):
a lost tail packet waits for the PTO instead of being declared lost by time.

kTimeThreshold is a constant of aioquic's recovery module, outside the controller,
so the constructor patches it (tests/mutants/_patch.py says why not at import).
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch


class LateTimeThreshold(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery, "K_TIME_THRESHOLD", 2.5)
