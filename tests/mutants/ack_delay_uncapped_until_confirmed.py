"""Not a bug: aioquic with RFC 9002 §5.3's "SHOULD ignore the peer's max_ack_delay
until the handshake is confirmed" added, which stock aioquic 1.7.2 lacks (docs/
findings.md, F109: it caps every ACK Delay). The planted fix shows
test_max_ack_delay_is_ignored_until_the_handshake_is_confirmed passes a sender that
follows the rule, while test_ack_delay_is_capped_at_max_ack_delay still holds it to
the cap once the handshake is confirmed.

aioquic caps the delay inside QuicPacketRecovery.on_ack_received, reading the peer's
max_ack_delay off the recovery object, which also knows whether the handshake is
confirmed; the constructor patches that method (tests/mutants/_patch.py says why not
at import) to read no limit there until it is.
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch
from .ack_delay_uncapped import _stock, _uncapped


def _uncapped_until_confirmed(self, **kwargs) -> None:
    # The mutant's uncapped path until the handshake is confirmed, stock after.
    (_stock if self.handshake_confirmed else _uncapped)(self, **kwargs)


class AckDelayUncappedUntilConfirmed(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketRecovery, "on_ack_received", _uncapped_until_confirmed)
