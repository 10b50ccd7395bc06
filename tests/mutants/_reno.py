"""aioquic's NewReno loss response (reno.py, 1.7.2) with its two constants as class
attributes, so a NewReno mutant that differs only in a number sets the number
instead of copying the method."""

from aioquic.quic.congestion.base import K_MINIMUM_WINDOW
from aioquic.quic.congestion.reno import K_LOSS_REDUCTION_FACTOR, RenoCongestionControl


class ParametrisedReno(RenoCongestionControl):
    longlook_family = "newreno"
    loss_reduction_factor = K_LOSS_REDUCTION_FACTOR
    minimum_window_datagrams = K_MINIMUM_WINDOW

    def on_packets_lost(self, *, now, packets) -> None:
        lost_largest_time = 0.0
        for packet in packets:
            self.bytes_in_flight -= packet.sent_bytes
            lost_largest_time = packet.sent_time
        if lost_largest_time > self._congestion_recovery_start_time:
            self._congestion_recovery_start_time = now
            self.congestion_window = max(int(self.congestion_window * self.loss_reduction_factor),
                                         self.minimum_window_datagrams * self._max_datagram_size)
            self.ssthresh = self.congestion_window
