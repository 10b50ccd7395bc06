"""Mutant: NewReno that takes every congestion event for persistent congestion and
collapses its window to kMinimumWindow, however short the loss (RFC 9002 §7.6.2:
only lost packets sent further apart than the persistent congestion duration may).
"""

from aioquic.quic.congestion.reno import RenoCongestionControl


class CollapseOnEveryLoss(RenoCongestionControl):
    longlook_family = "newreno"

    def on_packets_lost(self, *, now, packets) -> None:
        super().on_packets_lost(now=now, packets=packets)
        self.on_persistent_congestion()
