"""Mutant: the server resends its CRYPTO data early on every duplicate ClientHello, not
a limited number of times per connection (RFC 9002 §6.2.3: "an endpoint MAY, for a
limited number of times per connection, send a packet containing unacknowledged
CRYPTO data earlier than the PTO expiry").

Stock aioquic answers a client Initial with CRYPTO data it already has once per
connection: `_handle_crypto_frame` reschedules its CRYPTO data and sets
`_crypto_retransmitted`. The constructor wraps that handler to clear the flag first,
so every duplicate is answered.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl
from aioquic.quic.connection import QuicConnection

from ._patch import patch

_stock_handle_crypto_frame = QuicConnection._handle_crypto_frame


def _handle_crypto_frame_every_time(self, context, frame_type, buf) -> None:
    self._crypto_retransmitted = False
    _stock_handle_crypto_frame(self, context, frame_type, buf)


class CryptoResendUnlimited(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(QuicConnection, "_handle_crypto_frame", _handle_crypto_frame_every_time)
