"""Mutant: loss declared only once a packet ten numbers later is acknowledged
(kPacketThreshold 10 instead of the example's 3, RFC 9002 §6.1.1), so each loss
waits for the time threshold or a long run of later acknowledgements, and recovery
starts late. A threshold raised for reordering that never happened.

The threshold is a constant of aioquic's recovery module, outside the controller,
so the constructor patches it (tests/mutants/_patch.py says why not at import).
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch


class PacketThresholdTen(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery, "K_PACKET_THRESHOLD", 10)
