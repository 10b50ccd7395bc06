"""When the data's sender acknowledges what its peer sent, read from the sender side's
decrypted capture: for each ack-eliciting 1-RTT packet of the peer, its arrival at
the sender and the first datagram of the sender whose ACK frame covers it.

RFC 9000 §13.2.1 gives the bound (every ack-eliciting 1-RTT packet acknowledged
within the sender's own max_ack_delay), and RFC 9002 §7.7 the reason it holds while
data is paced: ACK-only packets are not paced, so a pacer holding data back never
holds an acknowledgement that is due. A sender whose pacer holds them is seen when
it holds one past that bound; one held for less is not told apart from a delayed
acknowledgement, which the bound allows.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from harness.verdict import analysis


@dataclass(frozen=True)
class OwedAck:
    """One ack-eliciting 1-RTT packet of the peer and the sender's answer to it."""

    pn: int
    arrived_us: float  # reached the sender's side of the link
    deadline_us: float  # arrived + the sender's max_ack_delay + the timer slack
    acked_us: float | None  # the sender's first datagram acknowledging it (None: none)
    #: At the deadline the sender still had data of a stream to send (it had sent the
    #: stream's first bytes, not yet its FIN): what its window or pacer held back.
    sending: bool

    @property
    def late(self) -> bool:
        return self.acked_us is None or self.acked_us > self.deadline_us

    @property
    def delay_us(self) -> float | None:
        return None if self.acked_us is None else self.acked_us - self.arrived_us


def sending_intervals(view) -> list[tuple[float, float]]:
    """(from, to) µs while the sender had a stream's data to send: from the stream's
    first STREAM frame to the first one carrying its FIN, merged. Streams that never
    end (HTTP/3's control and QPACK streams) are left out."""
    first: dict[int, float] = {}
    fin: dict[int, float] = {}
    conn = analysis.busiest_connection(view, "s2c")
    for d in view.datagrams:
        if d.entered and d.direction == "s2c" and (conn is None or d.conn == conn):
            for f in (f for p in d.packets if p.space == "application" for f in p.frames):
                if getattr(f, "name", "") == "stream":
                    first.setdefault(f.stream_id, d.t_us)
                    if f.fin:
                        fin.setdefault(f.stream_id, d.t_us)
    return analysis.merged([(first[s], t) for s, t in fin.items()])


def owed_acks(view, slack_us: float) -> list[OwedAck]:
    """Every ack-eliciting 1-RTT packet the peer's datagrams brought to the sender
    after its handshake was confirmed, with the first of the sender's datagrams whose
    application-space ACK frame covers it. Those whose deadline falls after the
    sender's last datagram are left out: the connection ended before the
    acknowledgement was due."""
    after = analysis.sender_confirmed_us(view)
    if after is None:
        return []
    bound = analysis.max_ack_delay_us(view, "s2c") + slack_us
    arrived: dict[int, float] = {}  # pn → its first arrival
    acked: dict[int, float] = {}  # pn → the sender's first datagram acknowledging it
    last_us = 0.0
    # The transfer's connection only: another's packet numbers would mix with its own.
    conn = analysis.busiest_connection(view, "s2c")
    for d in sorted((d for d in view.datagrams if conn is None or d.conn == conn), key=lambda d: d.t_us):
        if not d.entered and d.direction == "c2s" and d.t_us >= after:
            for p in d.packets:
                if p.kind == "1rtt" and p.ack_eliciting and p.pn is not None:
                    arrived.setdefault(p.pn, d.t_us)
        elif d.entered and d.direction == "s2c":
            last_us = d.t_us
            for f in (f for p in d.packets if p.space == "application" for f in p.frames):
                for low, high in getattr(f, "ranges", ()) if getattr(f, "name", "") == "ack" else ():
                    for pn in arrived.keys() - acked.keys():
                        if low <= pn <= high:
                            acked[pn] = d.t_us
    busy = sending_intervals(view)
    starts = [a for a, _ in busy]
    out = []
    for pn, t in sorted(arrived.items(), key=lambda kv: kv[1]):
        deadline = t + bound
        if deadline > last_us:
            continue
        i = bisect.bisect_right(starts, deadline)
        sending = bool(i) and busy[i - 1][1] > deadline
        out.append(OwedAck(pn, t, deadline, acked.get(pn), sending))
    return out
