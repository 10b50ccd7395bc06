"""Mutant: the congestion window never exceeds 107 datagrams.

Source: Kakhki et al., "Taking a Long Look at QUIC" (IMC'17): Google QUIC's maximum
congestion window (MACW) of 107 packets halved throughput on large transfers over
paths whose bandwidth-delay product exceeds it.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl

MAX_WINDOW_PACKETS = 107


class WindowCap107(RenoCongestionControl):
    longlook_family = "newreno"

    def on_packet_acked(self, *, now, packet) -> None:
        super().on_packet_acked(now=now, packet=packet)
        self.congestion_window = min(self.congestion_window, MAX_WINDOW_PACKETS * self._max_datagram_size)
