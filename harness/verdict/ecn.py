"""What ECN shows on the wire: the datagrams the link CE-marked, and the ACKs that
echoed a rise of the CE count to the sender (RFC 9000 §13.4.1, §19.3.2).

Shared by the ECN properties (properties/test_ecn.py). The link marks only an
ECN-capable datagram (harness/emulator: ECT(0) or ECT(1) becomes CE), so a "ce" mark
in the ground truth is the sender's ECT datagram marked and delivered; the echo is
read from the decrypted ACK_ECN frames reaching the sender.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass


@dataclass(frozen=True)
class CeEcho:
    """An application-space ACK reaching the sender whose CE count rose."""

    t_us: float  # arrival at the sender's side of the link
    largest: int  # its largest acknowledged packet number
    ce: int  # the CE count it reports
    rise: int  # by how much the count rose since the last ACK_ECN


def ce_marked(records) -> list:
    """The transfer's data-direction ground-truth records the link CE-marked."""
    return [r for r in records if "ce" in r.marks]


def ce_echoes(view) -> list[CeEcho]:
    """Every ACK with a risen CE count, in arrival order. The count is per packet
    number space; only the application space carries data here."""
    seen = 0
    out = []
    for d in view.datagrams:
        if d.entered or d.direction != "c2s":
            continue
        for p in d.packets:
            if p.space != "application":
                continue
            for f in p.frames:
                ecn = getattr(f, "ecn", None) if getattr(f, "name", "") == "ack" else None
                if ecn and ecn[2] > seen:
                    out.append(CeEcho(d.t_us, f.largest, ecn[2], ecn[2] - seen))
                    seen = ecn[2]
    return out


#: A cut logged this long before the ACK's capture time is that ACK's processing: the
#: log's clock and the capture's agree within about a millisecond (docs/trace.md).
SAME_ACK_US = 1_000.0


@dataclass(frozen=True)
class Judged:
    """A CE echo that called for a congestion event, and the cut that answered it."""

    echo: CeEcho
    sent_us: float  # when the largest acknowledged packet was sent
    cut: object | None  # the harness.observe.reductions.Reduction, or None: ignored


def congestion_events(echoes: list[CeEcho], sent: dict, cuts: list, react_us: float,
                      marks_us: list[float]) -> list[Judged]:
    """Each echo that is a new congestion event the link caused, with the cut logged
    from SAME_ACK_US before its arrival to `react_us` after (stacks log the window with
    the ACK's processing, or with their next metrics update), or None.

    - The link caused it (link_echoes): its rise takes in a CE mark of the link's not
      yet taken in by an earlier echo. `marks_us` are the earliest times each mark
      could be echoed back (delivered to the receiver, plus the ACK's one-way delay),
      sorted. A rise with none is the sender's own CE-marked probe (RFC 9002 §8.3: "A sender can
      detect suppression of reports by marking occasional packets that it sends with
      an ECN-CE marking"; s2n-quic does), not a signal from the network.
    - It is a new event: RFC 9002 App. B.7, not while in a recovery period begun after
      the largest acknowledged packet was sent, i.e. no cut between that send and the
      echo. An echo whose packet the trace lacks is left out: when it was sent is
      unknown."""
    out = []
    for echo in link_echoes(echoes, marks_us):
        t_sent = sent.get(("application", echo.largest))
        answer_from = echo.t_us - SAME_ACK_US
        if t_sent is None or any(t_sent <= c.t_us < answer_from for c in cuts):
            continue
        cut = next((c for c in cuts if answer_from <= c.t_us <= echo.t_us + react_us), None)
        out.append(Judged(echo, t_sent, cut))
    return out


def link_echoes(echoes: list[CeEcho], marks_us: list[float]) -> list[CeEcho]:
    """The echoes whose rise takes in a CE mark of the link's not taken in by an earlier
    echo (`marks_us` as for congestion_events); the others are the sender's own
    CE-marked probes (RFC 9002 §8.3)."""
    out, taken = [], 0
    for echo in echoes:
        new = min(bisect.bisect_right(marks_us, echo.t_us) - taken, echo.rise)
        if new > 0:
            taken += new
            out.append(echo)
    return out


def echo_times(records, ack_delay_us: float) -> list[float]:
    """The earliest time each CE mark of `records` (ground truth, data direction) could
    reach the sender as an echo: its delivery to the receiver plus the ACK direction's
    one-way delay; sorted."""
    return sorted(r.dep_us + ack_delay_us for r in ce_marked(records) if r.dep_us is not None)


@dataclass(frozen=True)
class FloorRate:
    """The sender's rate at its floor under persistent marks: `per_rtt` of its largest
    datagrams per round trip of `rtt_us`, over [begin_us, end_us)."""

    begin_us: float
    end_us: float
    rtt_us: float
    sent: int
    largest: int

    @property
    def rtts(self) -> float:
        return (self.end_us - self.begin_us) / self.rtt_us

    @property
    def per_rtt(self) -> float:
        return self.sent / self.largest / self.rtts


def rate_at_floor(records, at_floor_us: float, end_us: float, srtts_us: list[float], base_rtt_us: float,
                  settle_rtts: float) -> FloorRate:
    """What the sender put on the link (ground-truth `records` of its direction, IP
    sizes) from `settle_rtts` round trips after its window reached the floor to
    `end_us`. The round trip is the median smoothed RTT it logged there, never below
    the base RTT: a queue the sender's own flight builds lengthens its round trip, and
    the rate a window gives is per that round trip."""
    ordered = sorted(srtts_us)
    rtt_us = max(base_rtt_us, ordered[len(ordered) // 2] if ordered else 0.0)
    begin = at_floor_us + settle_rtts * rtt_us
    largest = max((r.size for r in records), default=1)
    sent = sum(r.size for r in records if begin <= r.arr_us < end_us)
    return FloorRate(begin, end_us, rtt_us, sent, largest)
