"""Mutant: NewReno whose loss reduction factor is 0.9 instead of 0.5
(kLossReductionFactor, RFC 9002 §7.3.2), so it yields almost nothing to
competing flows.

Source: a wrong β is a real defect class: quic-go v0.65.0 cuts NewReno by 0.7
(finding F1, docs/findings.md); 0.9 is the same mistake made more aggressive.
"""

from aioquic.quic.congestion.base import K_MINIMUM_WINDOW
from aioquic.quic.congestion.reno import RenoCongestionControl

BETA = 0.9


class Beta09(RenoCongestionControl):
    longlook_family = "newreno"

    def on_packets_lost(self, *, now, packets) -> None:
        lost_largest_time = 0.0
        for packet in packets:
            self.bytes_in_flight -= packet.sent_bytes
            lost_largest_time = packet.sent_time
        if lost_largest_time > self._congestion_recovery_start_time:
            self._congestion_recovery_start_time = now
            self.congestion_window = max(int(self.congestion_window * BETA),
                                         K_MINIMUM_WINDOW * self._max_datagram_size)
            self.ssthresh = self.congestion_window
