"""Mutant: loss declared once a single later packet is acknowledged
(kPacketThreshold 1 instead of 3, RFC 9002 §6.1.1), so any reordering reads as loss.

Source: Kakhki et al., "Taking a Long Look at QUIC" (IMC'17) §5: QUIC read
reordering as loss and cut its window; a threshold of 1 is that bug at its plainest.
The threshold is a constant of aioquic's recovery module, outside the controller,
so the constructor patches it (tests/mutants/_patch.py says why not at import).
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch


class PacketThresholdOne(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery, "K_PACKET_THRESHOLD", 1)
