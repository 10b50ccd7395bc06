"""PTO expiries seen from the wire, for a stack whose log has none (aioquic).

A PTO expiry is not on the wire, but its probe is: RFC 9002 §6.2.4 has the sender
send an ack-eliciting packet when the timer fires. From the sender's side of the
link (wire_trace: its sends, the ACKs that reached it, RTTs from them) a send is
taken for a probe, and so for one expiry, when all of these hold:

- it is ack-eliciting and in the application space, after the first RTT sample
  (the PTO of the handshake spaces is not what the model speaks of);
- ack-eliciting bytes were in flight (§6.2.1 arms the timer only then);
- nothing from the peer arrived since the sender's last send, nor just before
  this one: it answers a timer, not an ACK;
- the sender had sent nothing ack-eliciting for at least PTO_SHARE of the PTO
  period RFC 9002 computes from the wire's RTT estimate (§6.2.1: smoothed_rtt + max(4·rttvar,
  kGranularity) + the peer's max_ack_delay), backed off by the expiries already
  counted: the stack's own estimate is close to the wire's but not equal (the timer
  runs from the last ack-eliciting send, §6.2.1: an ACK-only packet, such as the one
  answering the peer's own probe, does not restart it);
- no loss timer would fire first: no packet in flight below the largest
  acknowledged had passed its time threshold (§6.1.2, 9/8·max(srtt, latest_rtt)),
  as a loss timer, when armed, takes the PTO's place (§6.2.1, A.8).

Consecutive expiries count up (pto_count 1, 2, …) until an ACK newly acknowledges
something (§6.2.1 resets the count). The events carry no count of their own
(pto_count None): the count is the wire's reading, not the stack's, and trace
validation must not hold a stack to it. A second probe of the same expiry (§6.2.4
allows two) follows the first within microseconds and so is no new expiry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.observe.events import Metrics, PacketAcked, PacketLost, PacketSent, PtoExpired, Trace

#: RFC 9002 kGranularity, µs.
GRANULARITY_US = 1_000
#: The share of the wire's PTO period a silence must last to be a timer's: below 1
#: because the stack's RTT estimate differs from the wire's by its ack-delay handling
#: and timer slack; well above any pacing gap (a fraction of the RTT).
PTO_SHARE = 0.7
#: A send this soon after a datagram from the peer answers that datagram.
REACTION_US = 2_000


@dataclass
class _Sender:
    max_ack_delay_us: float
    srtt: float | None = None
    rttvar: float = 0.0
    latest: float = 0.0
    last_send: float | None = None
    last_eliciting: float | None = None  # the PTO timer's start (§6.2.1)
    last_rx: float | None = None
    largest_acked: int = -1
    flying: dict[int, float] = field(default_factory=dict)  # pn → sent time, ack-eliciting, application space
    count: int = 0
    events: list[PtoExpired] = field(default_factory=list)

    def period(self) -> float:
        assert self.srtt is not None
        return self.srtt + max(4 * self.rttvar, GRANULARITY_US) + self.max_ack_delay_us

    def loss_timer_due(self, t: float) -> bool:
        limit = 9 / 8 * max(self.srtt or 0.0, self.latest)
        return any(pn < self.largest_acked and t - sent >= limit for pn, sent in self.flying.items())

    def on_sent(self, e: PacketSent) -> None:
        if e.space != "application":
            return
        if e.ack_eliciting is not False:
            if self._is_probe(e.t_us):
                self.count += 1
                self.events.append(PtoExpired(e.t_us))
            self.flying[e.pn] = e.t_us
            self.last_eliciting = e.t_us
        self.last_send = e.t_us

    def _is_probe(self, t: float) -> bool:
        if self.srtt is None or self.last_send is None or not self.flying:
            return False
        if self.last_rx is not None and (self.last_rx > self.last_send or t - self.last_rx < REACTION_US):
            return False
        if t - (self.last_eliciting or self.last_send) < PTO_SHARE * self.period() * 2 ** self.count:
            return False
        return not self.loss_timer_due(t)


def derive_ptos(wire: Trace, max_ack_delay_us: float) -> list[PtoExpired]:
    """The PTO expiries `wire` (join.wire_trace of the sending side, with its
    presumed losses) shows, by the rules of the module docstring;
    `max_ack_delay_us` is the peer's."""
    s = _Sender(max_ack_delay_us)
    for e in wire.events:
        if isinstance(e, PacketSent):
            s.on_sent(e)
        elif isinstance(e, PacketAcked):
            s.last_rx = e.t_us
            if e.space == "application":
                if s.flying.pop(e.pn, None) is not None:
                    s.count = 0
                s.largest_acked = max(s.largest_acked, e.pn)
        elif isinstance(e, PacketLost):
            s.flying.pop(e.pn, None)  # presumed lost at an ACK: no longer arms a loss timer
        elif isinstance(e, Metrics) and e.smoothed_rtt_us is not None:
            # wire_trace writes one per ACK frame that reached the sender, with its RTT estimate.
            s.last_rx = e.t_us
            s.srtt, s.rttvar, s.latest = e.smoothed_rtt_us, e.rtt_variance_us or 0.0, e.latest_rtt_us or 0.0
    return s.events
