"""Mutant: NewReno that halves the window on every loss declaration, ignoring the
recovery period (RFC 9002 §7.3.2 says one reduction per congestion event).

A bug class seen in early QUIC stacks; the property that must kill it is
properties/test_window.py::test_one_window_reduction_per_recovery_period.
"""

from aioquic.quic.congestion.base import K_MINIMUM_WINDOW
from aioquic.quic.congestion.reno import RenoCongestionControl


class HalveEveryLoss(RenoCongestionControl):
    longlook_family = "newreno"

    def on_packets_lost(self, *, now, packets) -> None:
        for packet in packets:
            self.bytes_in_flight -= packet.sent_bytes
        # The bug: no check of the lost packets' send times against the recovery start.
        self._congestion_recovery_start_time = now
        self.congestion_window = max(self.congestion_window // 2, K_MINIMUM_WINDOW * self._max_datagram_size)
        self.ssthresh = self.congestion_window
