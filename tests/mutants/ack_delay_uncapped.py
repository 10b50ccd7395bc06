"""Mutant: the sender subtracts a peer's whole ACK Delay from an RTT sample, however
far it exceeds the max_ack_delay the peer declared (RFC 9002 §5.3: after the
handshake is confirmed an endpoint "MUST use the lesser of the acknowledgment delay
and the peer's max_ack_delay"). A receiver that holds its acknowledgements past its
max_ack_delay then pulls smoothed_rtt down by the excess.

aioquic caps the delay inside QuicPacketRecovery.on_ack_received, reading the
peer's max_ack_delay off the recovery object; the constructor patches that method
(tests/mutants/_patch.py says why not at import) to read no limit there, while the
PTO, which reads the same attribute elsewhere, keeps the peer's.
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch

_stock = recovery.QuicPacketRecovery.on_ack_received


def _uncapped(self, **kwargs) -> None:
    declared = self.max_ack_delay
    self.max_ack_delay = float("inf")
    try:
        _stock(self, **kwargs)
    finally:
        self.max_ack_delay = declared


class AckDelayUncapped(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketRecovery, "on_ack_received", _uncapped)
