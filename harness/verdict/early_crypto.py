"""A server's early retransmissions of its CRYPTO data, read off its decrypted capture.

RFC 9002 §6.2.3: a server that receives an Initial packet carrying CRYPTO data it
already has may assume the client did not receive its own Initial flight, and "MAY,
for a limited number of times per connection, send a packet containing unacknowledged
CRYPTO data earlier than the PTO expiry". One such answer is all the RFC asks ("Doing so
at most once for each connection is adequate"); an endpoint that answers every packet
it receives "risks creating an infinite exchange of packets".

`early_answers` finds, before the client's address is validated (its first Handshake
packet), every arrival of a client Initial whose CRYPTO bytes the server already had
(a *duplicate*: the client's own probe, retransmitting its ClientHello), and whether
the server answered it at once with CRYPTO data it had sent before. Two things other
than the duplicate can make a server send at that moment, and both are kept out:

- its own probe timer. The schedule of the property sets the server's timer apart
  from the client's (the client's first flight reaches the server late, so the client's
  probes, lockstep with the server's otherwise, arrive hundreds of ms before the
  server's expiries), and an answer must leave within `answer_us` of the arrival;
- its anti-amplification limit (RFC 9000 §8.1): a server whose timer expired while
  it could not send three times what it had received sends its probe when the next
  client datagram renews its budget. An answer counts as early only if the server
  could have sent it before the arrival (the budget left then covered the answer's
  bytes), and a duplicate is an *opportunity* only if that budget covered a full
  datagram.

The counting needs no log: a server's timers are internal, the wire is not.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from harness.verdict.analysis import merged

#: RFC 9000 §8.1: before the client's address is validated, a server sends at most
#: this many times the bytes it has received.
AMPLIFICATION_FACTOR = 3
#: RFC 9000 §14.1: a datagram carrying an ack-eliciting Initial is at least this big.
FULL_DATAGRAM = 1200
#: Duplicates arriving within this of one another are one (a ClientHello that spans
#: two datagrams is retransmitted as two), µs.
SAME_PROBE_US = 5_000


class Ranges:
    """Byte ranges seen of one CRYPTO stream, merged: [start, end) pairs in order."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int]] = []

    def covers(self, start: int, end: int) -> bool:
        """Whether every byte of [start, end) was seen (an empty range never is)."""
        if end <= start:
            return False
        i = bisect.bisect_right(self.spans, (start, float("inf"))) - 1
        return i >= 0 and self.spans[i][0] <= start and self.spans[i][1] >= end

    def overlaps(self, start: int, end: int) -> bool:
        """Whether any byte of [start, end) was seen."""
        return any(s < end and start < e for s, e in self.spans)

    def add(self, start: int, end: int) -> None:
        if end > start:
            self.spans = merged([*self.spans, (start, end)])


def _crypto(d, space: str) -> list[tuple[int, int]]:
    """[start, end) of each CRYPTO frame of the datagram's packets in `space`."""
    return [(f.offset, f.offset + len(f.data)) for p in d.packets if p.space == space
            for f in p.frames if getattr(f, "name", "") == "crypto"]


@dataclass
class Duplicate:
    """A client probe that reached the server with CRYPTO data the server already had."""

    t_us: float  # its (first datagram's) arrival, µs
    budget: int  # what the server could still send before it arrived (bytes)
    answer: list = field(default_factory=list)  # the server's datagrams within answer_us, resending CRYPTO data
    answer_bytes: int = 0

    @property
    def opportunity(self) -> bool:
        """The server could have answered without this arrival's bytes."""
        return self.budget >= FULL_DATAGRAM

    @property
    def answered_early(self) -> bool:
        """An answer the server could have sent before the arrival: not a probe that
        waited for the amplification budget, so the duplicate made it."""
        return bool(self.answer) and self.answer_bytes <= self.budget


@dataclass
class EarlyCrypto:
    duplicates: list[Duplicate]
    validated_us: float  # the first client Handshake packet's arrival (inf: none)

    @property
    def opportunities(self) -> list[Duplicate]:
        return [d for d in self.duplicates if d.opportunity]

    @property
    def early(self) -> list[Duplicate]:
        return [d for d in self.opportunities if d.answered_early]


def early_answers(view, answer_us: float) -> EarlyCrypto:
    """The server side's capture `view` (datagrams it received and sent): each duplicate
    the client's probes brought before validation, and the server's answer to it."""
    first = next((d for d in view.datagrams if not d.entered and d.direction == "c2s"
                  and any(p.space == "initial" for p in d.packets)), None)
    if first is None:
        return EarlyCrypto([], float("inf"))
    ours = [d for d in view.datagrams if d.conn == first.conn or d.conn is None]
    ours.sort(key=lambda d: d.t_us)
    validated = next((d.t_us for d in ours if not d.entered and d.direction == "c2s"
                      and any(p.space == "handshake" for p in d.packets)), float("inf"))
    received = Ranges()  # the client's Initial CRYPTO bytes the server has
    sent = {"initial": Ranges(), "handshake": Ranges()}  # the server's CRYPTO bytes sent
    got = spent = 0  # UDP payload bytes received from and sent to the client
    duplicates: list[Duplicate] = []
    for d in ours:
        if d.t_us >= validated:
            break
        if not d.entered and d.direction == "c2s":
            frames = _crypto(d, "initial")
            if frames and all(received.covers(s, e) for s, e in frames):
                last = duplicates[-1] if duplicates else None
                if last is None or d.t_us - last.t_us > SAME_PROBE_US:
                    duplicates.append(Duplicate(d.t_us, AMPLIFICATION_FACTOR * got - spent))
            for s, e in frames:
                received.add(s, e)
            got += d.udp_size
        elif d.entered and d.direction == "s2c":
            resent = any(sent[space].overlaps(s, e) for space in sent for s, e in _crypto(d, space))
            last = duplicates[-1] if duplicates else None
            if resent and last is not None and d.t_us - last.t_us <= answer_us:
                last.answer.append(d)
                last.answer_bytes += d.udp_size
            for space in sent:
                for s, e in _crypto(d, space):
                    sent[space].add(s, e)
            spent += d.udp_size
    return EarlyCrypto(duplicates, validated)
