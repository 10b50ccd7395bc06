"""Mutant: a client that arms no probe timer while nothing of its own is in flight,
though none of its Handshake packets has been acknowledged (RFC 9002 §6.2.2.1: it MUST
arm one, or a server at its anti-amplification limit and the client wait for each
other).

aioquic's client arms it while `peer_completed_address_validation` is false; the
constructor patches the recovery's timer to behave as if the server had validated it.
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch

_stock = recovery.QuicPacketRecovery.get_loss_detection_time


def _as_if_validated(self, *, amplification_limited: bool):
    kept = self.peer_completed_address_validation
    self.peer_completed_address_validation = True
    try:
        return _stock(self, amplification_limited=amplification_limited)
    finally:
        self.peer_completed_address_validation = kept


class NoAntiDeadlockProbe(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketRecovery, "get_loss_detection_time", _as_if_validated)
