"""Mutant: no loss timer. A packet a later acknowledgement leaves short of its time
threshold is declared lost only by the next acknowledgement or a probe timeout
(RFC 9002 §6.1.2: "If packets sent prior to the largest acknowledged packet cannot
yet be declared lost, then a timer SHOULD be set for the remaining time").

aioquic arms the loss timer from the packet spaces' loss_time through
`_get_loss_space`, a method of its recovery class outside the controller; the
constructor patches it (tests/mutants/_patch.py says why not at import). With no
loss space, the timer is the PTO's alone.
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch


def _no_loss_space(self):
    return None


class NoLossTimer(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketRecovery, "_get_loss_space", _no_loss_space)
