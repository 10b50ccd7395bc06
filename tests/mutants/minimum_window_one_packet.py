"""Mutant: a minimum window of one datagram instead of kMinimumWindow = 2 ×
max_datagram_size (RFC 9002 §7.2), on loss and on persistent congestion.

Source: TCP's loss window after a retransmission timeout is one segment
(RFC 5681 §3.1); a port of that rule into QUIC breaks §7.2, which keeps two so
that a lone ACK-eliciting packet never waits for a delayed ACK.
"""

from aioquic.quic.congestion.reno import K_LOSS_REDUCTION_FACTOR, RenoCongestionControl


class MinimumWindowOnePacket(RenoCongestionControl):
    longlook_family = "newreno"

    def on_packets_lost(self, *, now, packets) -> None:
        lost_largest_time = 0.0
        for packet in packets:
            self.bytes_in_flight -= packet.sent_bytes
            lost_largest_time = packet.sent_time
        if lost_largest_time > self._congestion_recovery_start_time:
            self._congestion_recovery_start_time = now
            self.congestion_window = max(int(self.congestion_window * K_LOSS_REDUCTION_FACTOR),
                                         self._max_datagram_size)
            self.ssthresh = self.congestion_window

    def on_persistent_congestion(self) -> None:
        self.congestion_window = self._max_datagram_size
        self._congestion_recovery_start_time = 0.0
