"""Mutant: every probe timeout sends two probe packets, a PING each when there is
nothing else to send (RFC 9002 §6.2.4: "When there is no data to send, the sender
SHOULD send a PING or other ack-eliciting frame in a single packet"), as quiche does
from its second expiry on (F104).

aioquic's connection writes one PING for a pending probe and clears the flag; the
constructor (tests/mutants/_patch.py says why not at import) makes the flag a property
that stays set for one more packet after each probe is first written.
"""

from aioquic.quic.connection import QuicConnection
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch


def _get(self) -> bool:
    return self.__dict__.get("_ll_probe", False)


def _set(self, value: bool) -> None:
    state = self.__dict__
    if value and not state.get("_ll_probe"):
        state["_ll_extra"] = 1  # a new expiry: one packet more than stock
    elif not value and state.get("_ll_probe") and state.get("_ll_extra", 0) > 0:
        state["_ll_extra"] -= 1
        return  # the probe stays pending for the next packet
    state["_ll_probe"] = value


class TwoIdleProbes(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(QuicConnection, "_probe_pending", property(_get, _set))
