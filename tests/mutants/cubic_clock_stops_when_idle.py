"""Not a bug: aioquic's CUBIC with RFC 9438 §4.2's clock planted in, which stock aioquic
1.7.2 lacks (docs/findings.md, F110): the curve's time t leaves out a pause in which the
sender had nothing in flight and nothing to send.

Stock aioquic takes t = now - t_epoch by the wall clock, and restarts its whole
controller after K_CUBIC_MAX_IDLE_TIME (2 s) without an ACK, which hides the running
clock after longer pauses only. The fix moves the epoch forward, when the sender sends
with nothing in flight, by the time since its last send, as Linux's CUBIC moves
epoch_start on CA_EVENT_TX_START. The planted fix shows
test_cubic_clock_stops_while_application_limited passes a sender that follows the rule.
"""

from aioquic.quic.congestion.cubic import CubicCongestionControl


class CubicClockStopsWhenIdle(CubicCongestionControl):
    longlook_family = "cubic"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        self._last_sent: float | None = None

    def on_packet_sent(self, *, packet) -> None:
        idle_since = self._last_sent if self.bytes_in_flight == 0 else None
        self._last_sent = packet.sent_time
        super().on_packet_sent(packet=packet)  # may restart the controller (t_epoch 0)
        if idle_since is not None and self._t_epoch and packet.sent_time > idle_since:
            self._t_epoch += packet.sent_time - idle_since
