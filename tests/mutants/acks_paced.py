"""Mutant: acknowledgements wait for the pacer. When an ACK falls due while the pacer
holds the sender's data back (before the release time it set last), nothing leaves,
the ACK included, until that release (RFC 9002 §7.7: packets containing only ACK
frames SHOULD NOT be paced; RFC 9000 §13.2.1: acknowledged within max_ack_delay).

Stock aioquic's _write_application skips the pacer while an ACK is due, and its pacer
lets a datagram go at any wake-up after the last one (its bucket holds only at the
instant of a send), so the ACK timer's wake-up always sends. The constructor wraps
that method: it remembers the release time each call leaves, and with an ACK due
before it, moves the ACK's time to that release and writes nothing (moving it, not
leaving it in the past, keeps the connection's timer from firing again at once).
"""

from aioquic import tls
from aioquic.quic.congestion.reno import RenoCongestionControl
from aioquic.quic.connection import QuicConnection

from ._patch import patch

_stock_write_application = QuicConnection._write_application


def _write_application_paced(self, builder, network_path, now: float) -> None:
    space = self._spaces[tls.Epoch.ONE_RTT]
    release = getattr(self, "_longlook_release", None)
    if space.ack_at is not None and space.ack_at <= now and release is not None and now < release:
        space.ack_at = release
        self._pacing_at = release
        return
    _stock_write_application(self, builder, network_path, now)
    self._longlook_release = self._pacing_at


class AcksPaced(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(QuicConnection, "_write_application", _write_application_paced)
