"""Not a bug: aioquic with RFC 9002 §5.2's min_rtt reset added ("Endpoints SHOULD set
the min_rtt to the newest RTT sample after persistent congestion is established"),
which stock aioquic 1.7.2 lacks (docs/findings.md, F84). The planted fix shows
test_min_rtt_resets_after_persistent_congestion passes a sender that follows the rule.

aioquic decides persistent congestion in `_in_persistent_congestion`, a method of its
recovery class outside the controller; the constructor patches it (tests/mutants/
_patch.py says why not at import) to set min_rtt to the latest sample whenever it
returns True.
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch

_stock = recovery.QuicPacketRecovery._in_persistent_congestion


def _resets_min_rtt(self, *, packets):
    established = _stock(self, packets=packets)
    if established:
        self._rtt_min = self._rtt_latest
    return established


class MinRttResetAfterPc(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketRecovery, "_in_persistent_congestion", _resets_min_rtt)
