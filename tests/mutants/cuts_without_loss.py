"""Planted controller (issue 27): NewReno that halves its window twice with no loss
at all, after 150 kB and again after 300 kB acknowledged. On a loss-free link its
reductions have no declared loss behind them, so the one-reduction property must
fail it; it used to skip it ("logs no packet_lost") because that run had none.
"""

from aioquic.quic.congestion.base import K_MINIMUM_WINDOW
from aioquic.quic.congestion.reno import RenoCongestionControl

#: Bytes acknowledged at which the window is halved, for no reason.
CUTS_AT = (150_000, 300_000)


class CutsWithoutLoss(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._acked_total = 0
        self._cuts_done = 0

    def on_packet_acked(self, *, now: float, packet) -> None:
        super().on_packet_acked(now=now, packet=packet)
        self._acked_total += packet.sent_bytes
        if self._cuts_done < len(CUTS_AT) and self._acked_total >= CUTS_AT[self._cuts_done]:
            self._cuts_done += 1
            self.congestion_window = max(self.congestion_window // 2, K_MINIMUM_WINDOW * self._max_datagram_size)
            self.ssthresh = self.congestion_window
