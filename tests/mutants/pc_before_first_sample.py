"""Mutant: packets lost before the first RTT sample count toward persistent congestion
(RFC 9002 §7.6.2: "The persistent congestion period SHOULD NOT start until there is at
least one RTT sample").

The bug of a stack that keeps the handshake packets its probe timer gave up on as
lost and, once the first sample sets the persistent congestion duration, judges them
by it: their send times, about a second apart on the initial RTT's probe timer, span
many times the duration a short path's first sample gives, and the window collapses
as the handshake completes. aioquic hands those packets to its controller as
expired (`on_packets_expired`); this controller keeps their send times and judges
them at its first RTT measurement, by that sample alone (smoothed_rtt = sample,
rttvar = sample / 2, max_ack_delay 25 ms, §5.3 and §7.6.1).
"""

from aioquic.quic.congestion.reno import RenoCongestionControl

#: kPersistentCongestionThreshold (RFC 9002 §7.6.1) and the default max_ack_delay (s).
THRESHOLD = 3
MAX_ACK_DELAY_S = 0.025


class PcBeforeFirstSample(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        self._expired_sent: list[float] = []
        self._sampled = False

    def on_packets_expired(self, *, packets) -> None:
        packets = list(packets)
        if not self._sampled:
            self._expired_sent += [p.sent_time for p in packets if p.is_ack_eliciting]
        super().on_packets_expired(packets=packets)

    def on_rtt_measurement(self, *, now: float, rtt: float) -> None:
        super().on_rtt_measurement(now=now, rtt=rtt)
        if self._sampled:
            return
        self._sampled = True
        duration = THRESHOLD * (rtt + 4 * rtt / 2 + MAX_ACK_DELAY_S)
        if len(self._expired_sent) >= 2 and max(self._expired_sent) - min(self._expired_sent) > duration:
            self.on_persistent_congestion()
