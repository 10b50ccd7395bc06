"""Mutant: CUBIC emulating two TCP flows: on loss it keeps β₂ = (2 − 1 + β)/2 = 0.85
of its window instead of β = 0.7 (RFC 9438 §4.6), and its Reno-friendly estimate
grows twice as fast, as for N = 2 connections.

Source: Kakhki et al. (IMC'17, Table 4): Google QUIC, whose CUBIC emulated two
connections by default, took about twice its fair share against 1, 2 or 4 TCP
CUBIC flows on a 5 Mbit/s, 36 ms, 30 KB-buffer bottleneck.
"""

from aioquic.quic.congestion.base import K_MINIMUM_WINDOW
from aioquic.quic.congestion.cubic import CubicCongestionControl

EMULATED_FLOWS = 2
BETA = 0.7
#: The multiplicative decrease of N emulated flows, each of which halves alone.
BETA_N = (EMULATED_FLOWS - 1 + BETA) / EMULATED_FLOWS


class CubicTwoFlows(CubicCongestionControl):
    longlook_family = "cubic"

    def __init__(self, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        self.additive_increase_factor = EMULATED_FLOWS * max_datagram_size

    def on_packets_lost(self, *, now, packets) -> None:
        lost_largest_time = 0.0
        for packet in packets:
            self.bytes_in_flight -= packet.sent_bytes
            lost_largest_time = packet.sent_time
        if lost_largest_time <= self._congestion_recovery_start_time:
            return
        self._congestion_recovery_start_time = now
        if self.congestion_window < self._W_max:
            self._W_max = int(self.congestion_window * (1 + BETA_N) / 2)
        else:
            self._W_max = self.congestion_window
        self.ssthresh = max(int(self.congestion_window * BETA_N), K_MINIMUM_WINDOW * self._max_datagram_size)
        self.congestion_window = self.ssthresh
        self._starting_congestion_avoidance = True
