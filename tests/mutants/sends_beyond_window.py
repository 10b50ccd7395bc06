"""Mutant: the sender's window check is off by four datagrams: the connection may
put cwnd + 4 × max_datagram_size in flight, while the controller (and its qlog)
keeps the true window (RFC 9002 §7: bytes_in_flight MUST NOT exceed the congestion
window, probes and one packet on entering recovery excepted).

The check lives in aioquic's connection, which reads the window through
QuicPacketRecovery.congestion_window; the constructor patches that property
(tests/mutants/_patch.py says why not at import).
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch

#: Datagrams beyond the window the connection lets into flight.
EXTRA_DATAGRAMS = 4


def _window_plus_four(self) -> int:
    return self._cc.congestion_window + EXTRA_DATAGRAMS * self._cc._max_datagram_size


class SendsBeyondWindow(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketRecovery, "congestion_window", property(_window_plus_four))
