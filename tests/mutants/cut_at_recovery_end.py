"""Mutant: NewReno that holds its cut back until the recovery period ends: the loss
that opens a period leaves cwnd and ssthresh as they were, and the reduced values
take effect when the first packet sent after the period began is acknowledged
(RFC 9002 §7.3.2 sets ssthresh "when loss is detected"; RFC 9438 §4.6 reduces
"immediately upon entering loss recovery").

Source: a controller that applies its reduction on the next ACK it processes, not
on the loss event itself; one round trip of sending at the old window after a loss.
The window still reaches the reduced value before the period ends, so the properties
of the cut's size and of the window at the period's end pass it.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl


class CutAtRecoveryEnd(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        self._held: tuple[int, int | None] | None = None

    def on_packets_lost(self, *, now, packets) -> None:
        window, ssthresh = self.congestion_window, self.ssthresh
        super().on_packets_lost(now=now, packets=packets)
        if self.congestion_window != window or self.ssthresh != ssthresh:
            # The bug: the new period's values are kept aside, not applied.
            self._held = (self.congestion_window, self.ssthresh)
            self.congestion_window, self.ssthresh = window, ssthresh

    def on_packet_acked(self, *, now, packet) -> None:
        if self._held is not None and packet.sent_time > self._congestion_recovery_start_time:
            self.congestion_window, self.ssthresh = self._held
            self._held = None
        super().on_packet_acked(now=now, packet=packet)
