"""Mutant: no pacer at all. The sender puts whatever its window allows on the wire
at once, so an acknowledgement that opens the window by N datagrams sends N
back to back (RFC 9002 §7.7: senders MUST either pace or limit bursts, and SHOULD
limit them to the initial window).

aioquic's pacer lives in its recovery module (QuicPacketPacer), which the
connection asks for the next send time; the constructor patches it to never hold
a datagram back.
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch


def _never_wait(self, now: float) -> None:
    return None


class NoPacing(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketPacer, "next_send_time", _never_wait)
