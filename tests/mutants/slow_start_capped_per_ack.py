"""Mutant: NewReno whose slow start adds at most two datagrams per ACK, whatever the
ACK acknowledges (TCP's Appropriate Byte Counting with L = 2, RFC 3465), where RFC
9002 §7.3.1's example adds every byte acknowledged and RFC 9406 §4.3 has a paced
sender use L = infinity.

Source: a controller ported from a TCP stack. On a link whose receiver acknowledges
every second datagram it is indistinguishable; after an ACK that acknowledges a
whole window at once (ACK compression, a lost ACK) it grows by two datagrams only.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl
from aioquic.quic.packet_builder import QuicSentPacket

#: TCP's ABC limit, datagrams per ACK.
L = 2


class SlowStartCappedPerAck(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        # aioquic hands an ACK's packets over one by one at the same `now`.
        self._ack_now: float | None = None
        self._ack_growth = 0

    def on_packet_acked(self, *, now: float, packet: QuicSentPacket) -> None:
        if now != self._ack_now:
            self._ack_now, self._ack_growth = now, 0
        slow = (packet.sent_time > self._congestion_recovery_start_time
                and (self.ssthresh is None or self.congestion_window < self.ssthresh))
        before = self.congestion_window
        super().on_packet_acked(now=now, packet=packet)
        if slow:
            # The bug: the growth of one ACK stops at L datagrams.
            room = max(L * self._max_datagram_size - self._ack_growth, 0)
            self.congestion_window = before + min(packet.sent_bytes, room)
            self._ack_growth += self.congestion_window - before
