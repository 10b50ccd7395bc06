"""Mutant: CUBIC that starts a new congestion event on every loss declaration,
including losses of packets sent before the current recovery began (RFC 9002
§7.3.2; RFC 9438 §4.6 reduces once per congestion event).

Source: the same bug class as halve_every_loss, in the other family: a burst of
losses from one overflow cuts the window once per ACK that declares some of them.
"""

from aioquic.quic.congestion.cubic import CubicCongestionControl


class CubicReduceEveryLoss(CubicCongestionControl):
    longlook_family = "cubic"

    def on_packets_lost(self, *, now, packets) -> None:
        # The bug: the recovery start is forgotten before the stock check reads it.
        self._congestion_recovery_start_time = -1.0
        super().on_packets_lost(now=now, packets=packets)
