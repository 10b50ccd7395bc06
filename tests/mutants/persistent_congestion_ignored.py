"""Mutant: persistent congestion leaves the window alone (RFC 9002 §7.6.2 collapses
it to kMinimumWindow).

Source: a real bug of two stock stacks, recorded as findings F2 (quic-go v0.65.0)
and F3 (quiche 0.30) in docs/findings.md; planted into aioquic, which is conformant
here, it must be killed by the same property.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl


class PersistentCongestionIgnored(RenoCongestionControl):
    longlook_family = "newreno"

    def on_persistent_congestion(self) -> None:
        pass
