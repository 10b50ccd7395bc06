"""Mutant: NewReno whose slow start grows the window by half the bytes acknowledged
(RFC 9002 §7.3.1: "While a sender is in slow start, the congestion window increases
by the number of bytes acknowledged when each acknowledgment is processed").

Source: a controller that counts a delayed ACK's two packets as one, or scales its
growth by a factor meant for conservative slow start; it still doubles its window,
in twice the round trips, and no rule judged only from above (the model's GrowWindow)
or from far below (RFC 9406's quarter) tells it from a correct one.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl
from aioquic.quic.packet_builder import QuicSentPacket


class HalfSlowStart(RenoCongestionControl):
    longlook_family = "newreno"

    def on_packet_acked(self, *, now: float, packet: QuicSentPacket) -> None:
        slow = (packet.sent_time > self._congestion_recovery_start_time
                and (self.ssthresh is None or self.congestion_window < self.ssthresh))
        before = self.congestion_window
        super().on_packet_acked(now=now, packet=packet)
        if slow:
            # The bug: half of what the RFC's slow start adds.
            self.congestion_window = before + packet.sent_bytes // 2
