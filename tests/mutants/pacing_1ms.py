"""Mutant: a pacer with a 1 ms timer that releases one datagram per tick, capping the
send rate near 1 datagram/ms (≈ 10 Mbit/s at 1252 B) whatever the window allows
(RFC 9002 §7.7: pacing must not hold the sender below the window's rate for long).

Source: the Connectify blog (2013) measured early QUIC's goodput flat near
9 Mbit/s on 2–70 Mbit/s links at 20 ms RTT, traced to 1 ms pacing granularity.
aioquic's pacer lives in its recovery module, so the constructor patches it.
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch

TICK_S = 0.001
_stock_update_rate = recovery.QuicPacketPacer.update_rate


def _update_rate_per_tick(self, congestion_window: int, smoothed_rtt: float) -> None:
    _stock_update_rate(self, congestion_window, smoothed_rtt)
    # One datagram per tick, no burst credit beyond that one datagram.
    self.packet_time = max(self.packet_time, TICK_S)
    self.bucket_max = self.packet_time
    self.bucket_time = min(self.bucket_time, self.bucket_max)


class Pacing1ms(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketPacer, "update_rate", _update_rate_per_tick)
