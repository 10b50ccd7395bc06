"""Window reductions, and the cause of each one found in the emulator's ground truth.

`reductions(trace)` finds every fall of the congestion window by more than
REDUCTION_FRACTION (harness/verdict/analysis.py re-exports it); `recovery_periods(trace)`
the recovery period each one opened. `reductions_with_cause` asks the ground truth
why the window fell, one `ReductionCause` per reduction:

| cause | evidence in the ground truth |
|---|---|
| `persistent_congestion` | real drops of the sender's datagrams spanning at least RFC 9002 §7.6.1's duration with nothing delivered between them (whatever the window did: that is for properties to judge) |
| `drop` | the link dropped a datagram the sender declared lost (or, without a join, one sent near it); `reasons` says why (loss_iid, queue_full, blackhole, …) |
| `spurious` | the sender declared packets lost that the link delivered (reordered or delayed) |
| `ecn_ce` | the link CE-marked a datagram of the sender shortly before |
| `idle_restart` | the sender sent nothing for at least one smoothed RTT just before |
| `none` | nothing of the above |

Two ways of matching, told apart by `matched_by`:
- "pn": with a `Join` (capture + key log), each packet the trace declared lost near the
  reduction is looked up by packet number: its datagram's fate is exact.
- "time": without one (no capture, a key log that does not fit, a stack that logs no
  packet_lost), the sender's ground-truth records near the declared packets' send times
  stand in; without declared losses, those sent after the previous reduction and at
  least a base RTT before this one. Approximate: a drop next to a spuriously declared
  packet is taken for the cause.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from harness.observe.groundtruth import GroundTruth, PacketRecord
from harness.observe.events import Metrics, PacketAcked, PacketLost, PacketSent, Trace
from harness.observe.join import Join, reorder_distances

#: A drop of the window by more than this fraction counts as a reduction; smaller
#: wobbles (rounding, pacing credit) do not.
REDUCTION_FRACTION = 0.10
#: Losses up to this long after a reduction still count as its cause: stacks log the
#: new window before or after the packet_lost events of the same ACK (µs).
AFTER_US = 1_000.0
#: Losses declared up to this many smoothed RTTs before a reduction may be its cause
#: (quic-go logs the cut window with its next metrics update, 17 ms late on a fixture).
LOOKBACK_RTTS = 2.0
#: Without a join, a declared packet's datagram is searched this close to its logged
#: send time (µs): the endpoint's send latency plus the qlog clock's error (docs/trace.md).
SEND_TOLERANCE_US = 5_000.0
#: RFC 9002 §6.2.1 / §7.6.1: max_ack_delay when the trace does not say (µs).
MAX_ACK_DELAY_US = 25_000.0
#: RFC 9002 §7.6.1 kPersistentCongestionThreshold.
PERSISTENT_CONGESTION_THRESHOLD = 3
CAUSES = ("persistent_congestion", "drop", "spurious", "ecn_ce", "idle_restart", "none")


@dataclass(frozen=True)
class Reduction:
    """The window fell from `before` to `after` at `t_us`."""

    t_us: float
    before: int
    after: int
    bytes_in_flight: int | None
    ssthresh: int | None

    def describe(self) -> str:
        return f"cwnd {self.before} → {self.after} at t={self.t_us / 1e6:.3f} s"


def reductions(trace: Trace) -> list[Reduction]:
    """Every fall of the window by more than REDUCTION_FRACTION. `bytes_in_flight`
    is the smallest value reported between the last window before the fall and the
    fall itself (stacks remove lost packets from flight before or after cutting)."""
    found = []
    cwnd: int | None = None
    inflight_low: int | None = None
    ssthresh = None
    for m in trace.of(Metrics):
        if m.bytes_in_flight is not None:
            inflight_low = m.bytes_in_flight if inflight_low is None else min(inflight_low, m.bytes_in_flight)
        ssthresh = m.ssthresh if m.ssthresh is not None else ssthresh
        if m.congestion_window is None or m.congestion_window == cwnd:
            continue
        if cwnd is not None and m.congestion_window < cwnd * (1 - REDUCTION_FRACTION):
            found.append(Reduction(m.t_us, cwnd, m.congestion_window, inflight_low, ssthresh))
        cwnd = m.congestion_window
        inflight_low = m.bytes_in_flight
    return found


@dataclass(frozen=True)
class RecoveryPeriod:
    """RFC 9002 §7.3.2: from a reduction until a packet sent after it is acknowledged."""

    reduction: Reduction
    start_us: float
    #: When the first packet sent at or after `start_us` was acknowledged; None when
    #: the trace ends first or has no acknowledgements (quinn's qlog: use the wire).
    end_us: float | None
    ended_by_pn: int | None


def recovery_periods(trace: Trace) -> list[RecoveryPeriod]:
    """One period per reduction, in time order. A reduction inside an open period
    (which RFC 9002 §7.3.2 forbids for losses of packets sent before it) opens no new
    period; it is left for the properties to judge."""
    sent = {(p.space, p.pn): p.t_us for p in trace.of(PacketSent)}
    acks = sorted(((a.t_us, sent.get((a.space, a.pn)), a.pn) for a in trace.of(PacketAcked)
                   if (a.space, a.pn) in sent), key=lambda a: a[0])
    out: list[RecoveryPeriod] = []
    for r in reductions(trace):
        if out and (out[-1].end_us is None or r.t_us < out[-1].end_us):
            continue
        end = next(((t, pn) for t, sent_us, pn in acks if sent_us >= r.t_us and t >= r.t_us), None)
        out.append(RecoveryPeriod(r, r.t_us, end[0] if end else None, end[1] if end else None))
    return out


def max_datagram(trace: Trace) -> int:
    """Largest application-space packet the sender sent, bytes (its datagram size)."""
    sizes = [p.size for p in trace.of(PacketSent) if p.space == "application" and p.size]
    return max(sizes) if sizes else 1200


@dataclass(frozen=True)
class ReductionCause:
    """One window reduction and what the ground truth says caused it."""

    reduction: Reduction
    cause: str  # one of CAUSES
    matched_by: str  # "pn" (through a Join) or "time" (see the module docstring)
    #: Drop reasons (loss_iid, queue_full, blackhole, …) for drop and persistent_congestion;
    #: "reordered" / "delayed" for spurious; the marks for ecn_ce; empty otherwise.
    reasons: tuple[str, ...]
    #: Packet numbers the trace declared lost that count towards this reduction.
    declared: tuple[int, ...]
    #: The ground-truth records that are the evidence (dropped, delivered-but-declared,
    #: CE-marked datagrams); empty for idle_restart and none.
    records: tuple[PacketRecord, ...]

    def describe(self) -> str:
        """One line for assertion messages."""
        what = self.cause + (f" ({', '.join(self.reasons)})" if self.reasons else "")
        pns = f", declared lost: pn {list(self.declared[:8])}" if self.declared else ""
        idx = f", link idx {[r.idx for r in self.records[:8]]}" if self.records else ""
        return f"{self.reduction.describe()}: {what}, matched by {self.matched_by}{pns}{idx}"


def reductions_with_cause(trace: Trace, ground_truth: GroundTruth, joined: Join | None = None,
                          conn: int = 0) -> list[ReductionCause]:
    """Every reduction of `trace` (the data sender's) with its cause in `ground_truth`.

    `joined`: the sender's side `harness.observe.join.Join` of the same run (e.g.
    `join.join_run(run_dir)`), whose connection `conn` is the trace's; None matches by
    time only. Times are the link's (µs), as in every normalised trace.
    """
    ctx = _Context(trace, ground_truth, joined, conn)
    gone = undone(trace)
    out, prev = [], None
    for i, r in enumerate(reductions(trace)):
        out.append(ctx.cause(r, prev))
        # An undone reduction no longer bounds what may cause the next one.
        if i not in gone:
            prev = r
    return out


def undone(trace: Trace) -> set[int]:
    """Indices (into `reductions(trace)`) of the reductions the stack undid: RFC 9438
    §4.9 lets a sender that finds a congestion event spurious restore its state, the
    recovery period's start included (quiche's CUBIC rollback does). Seen as the
    window jumping back, in one update and by more than REDUCTION_FRACTION, to at
    least where the latest reduction started. Growth back to it in small steps is no
    undo: the reduction still stands."""
    out: set[int] = set()
    n, cwnd, before = 0, None, 0
    for m in trace.of(Metrics):
        w = m.congestion_window
        if w is None or w == cwnd:
            continue
        if cwnd is not None and w < cwnd * (1 - REDUCTION_FRACTION):  # as in reductions()
            n, before = n + 1, cwnd
        elif cwnd is not None and n and w > cwnd * (1 + REDUCTION_FRACTION) and w >= before:
            out.add(n - 1)
        cwnd = w
    return out


class _Context:
    """The sender's ground-truth records and RTT history, indexed for lookups by time."""

    def __init__(self, trace: Trace, gt: GroundTruth, joined: Join | None, conn: int):
        self.direction = "s2c" if trace.vantage == "server" else "c2s"
        self.joined, self.conn = joined, conn
        flows = {p.flow for p in joined.packets if p.conn == conn} if joined is not None else None
        self.records = sorted((r for r in gt.records if r.dir == self.direction and r.proto == "udp"
                               and r.fate != "duplicate" and (flows is None or r.flow in flows)),
                              key=lambda r: r.arr_us)
        self.arrivals = [r.arr_us for r in self.records]
        self.by_idx = {r.idx: r for r in self.records}
        self.reorder = reorder_distances(gt.records, self.direction)
        self.losses = sorted(trace.of(PacketLost), key=lambda e: e.t_us)
        self.loss_times = [e.t_us for e in self.losses]
        self.sent = {(p.space, p.pn): p.t_us for p in trace.of(PacketSent)}
        self.rtt = _RttHistory(trace, _base_rtt(gt))

    def cause(self, r: Reduction, prev: Reduction | None) -> ReductionCause:
        """The first cause in CAUSES order that the evidence supports."""
        declared = self._declared(r, prev)
        matched, dropped, spurious = "time", [], []
        if self.joined is not None and declared:
            dropped, spurious, found = self._by_pn(declared)
            matched = "pn" if found else "time"
        if matched == "time":
            dropped, spurious = self._by_time(r, prev, declared)
        pns = tuple(d.pn for d in declared)
        if dropped:
            kind = "persistent_congestion" if self._persistent(dropped, r.t_us) else "drop"
            return ReductionCause(r, kind, matched, _uniq(x.reason for x in dropped), pns, tuple(dropped))
        if spurious:
            why = _uniq("reordered" if self.reorder.get(x.idx) or "held" in x.marks else "delayed" for x in spurious)
            return ReductionCause(r, "spurious", matched, why, pns, tuple(spurious))
        marked = [x for x in self._window(*self._span(r, prev)) if "ce" in x.marks]
        if marked:
            return ReductionCause(r, "ecn_ce", matched, ("ce",), pns, tuple(marked))
        if self._idle_before(r):
            return ReductionCause(r, "idle_restart", matched, (), pns, ())
        return ReductionCause(r, "none", matched, (), pns, ())

    def _declared(self, r: Reduction, prev: Reduction | None) -> list[PacketLost]:
        """Losses declared since the previous reduction (at most LOOKBACK_RTTS back), up
        to AFTER_US after this one."""
        lo = r.t_us - LOOKBACK_RTTS * self.rtt.srtt_at(r.t_us)
        if prev is not None:
            lo = max(lo, prev.t_us + AFTER_US)
        i = bisect.bisect_right(self.loss_times, lo)
        k = bisect.bisect_right(self.loss_times, r.t_us + AFTER_US)
        return self.losses[i:k]

    def _by_pn(self, declared: list[PacketLost]) -> tuple[list, list, bool]:
        """(dropped records, delivered records, any found) of the declared packets."""
        dropped, delivered, found = [], [], False
        for d in declared:
            p = self.joined.by_pn.get((self.conn, d.space, d.pn))
            rec = self.by_idx.get(p.idx) if p is not None else None
            if rec is None:
                continue
            found = True
            if rec.fate == "dropped":
                dropped.append(rec)
            elif rec.fate == "delivered":
                delivered.append(rec)
        return _dedup(dropped), _dedup(delivered), found

    def _by_time(self, r: Reduction, prev: Reduction | None, declared: list[PacketLost]) -> tuple[list, list]:
        """(dropped, reordered-or-delayed) records near the declared packets' send
        times; without any, those within `_span`."""
        times = [self.sent[(d.space, d.pn)] for d in declared if (d.space, d.pn) in self.sent]
        if times:
            near = [x for t in times for x in self._window(t - SEND_TOLERANCE_US, t + SEND_TOLERANCE_US)]
        else:
            near = self._window(*self._span(r, prev))
        dropped = [x for x in near if x.fate == "dropped"]
        odd = [x for x in near if x.fate == "delivered" and (self.reorder.get(x.idx) or {"held", "extra_delay",
               "reordered_by_jitter"} & set(x.marks))]
        return _dedup(dropped), _dedup(odd)

    def _persistent(self, dropped: list[PacketRecord], t_us: float) -> bool:
        """RFC 9002 §7.6: among the drops, an unbroken run of the sender's datagrams
        (nothing delivered in between) spans the persistent-congestion duration. Judged
        on the ground truth alone: whether the window then fell to kMinimumWindow is
        for the properties to check."""
        duration = self.rtt.pc_duration_at(t_us)
        run_start = None
        for x in self._window(min(x.arr_us for x in dropped), max(x.arr_us for x in dropped)):
            if x.fate != "dropped":
                run_start = None
            elif run_start is None:
                run_start = x.arr_us
            elif x.arr_us - run_start >= duration:
                return True
        return False

    def _idle_before(self, r: Reduction) -> bool:
        """The sender sent nothing for at least one smoothed RTT before the reduction,
        or before the datagrams around it that ended the pause."""
        srtt = self.rtt.srtt_at(r.t_us)
        i = bisect.bisect_left(self.arrivals, r.t_us - AFTER_US)
        k = bisect.bisect_right(self.arrivals, r.t_us + AFTER_US)
        if k == 0:
            return False
        if i == k:
            return r.t_us - self.arrivals[k - 1] >= srtt
        return i >= 1 and self.arrivals[i] - self.arrivals[i - 1] >= srtt

    def _window(self, lo: float, hi: float) -> list[PacketRecord]:
        """The sender's records that arrived at the link within [lo, hi]."""
        return self.records[bisect.bisect_left(self.arrivals, lo):bisect.bisect_right(self.arrivals, hi)]

    def _span(self, r: Reduction, prev: Reduction | None) -> tuple[float, float]:
        """Arrival times of datagrams whose fate may explain the reduction: sent after
        the previous reduction that still stands (RFC 9002 §7.3.2: a packet sent before a
        recovery period began cannot justify another cut; `undone`) and at least the link's base RTT before this
        one (the news has to come back), less the qlog clock's tolerance. No bound in
        RTTs: after a long blackhole the losses are declared a second or more later."""
        lo = prev.t_us if prev is not None else float("-inf")
        return lo, r.t_us - self.rtt.base + SEND_TOLERANCE_US


class _RttHistory:
    """The trace's smoothed RTT and RTT variance over time (forward-filled), with the
    link's base RTT before the first sample."""

    def __init__(self, trace: Trace, base_rtt_us: float):
        self.base = base_rtt_us
        self.t, self.srtt, self.var = [], [], []
        srtt, var = None, None
        for m in trace.of(Metrics):
            srtt = m.smoothed_rtt_us if m.smoothed_rtt_us is not None else srtt
            var = m.rtt_variance_us if m.rtt_variance_us is not None else var
            if srtt is not None:
                self.t.append(m.t_us)
                self.srtt.append(srtt)
                self.var.append(var if var is not None else srtt / 2)

    def _at(self, t: float) -> int:
        return bisect.bisect_right(self.t, t) - 1

    def srtt_at(self, t: float) -> float:
        """Smoothed RTT at `t` (µs), never below the link's base RTT."""
        i = self._at(t)
        return max(self.srtt[i] if i >= 0 else self.base, self.base)

    def pc_duration_at(self, t: float) -> float:
        """RFC 9002 §7.6.1: (srtt + max(4·rttvar, kGranularity) + max_ack_delay) × 3, µs."""
        i = self._at(t)
        var = self.var[i] if i >= 0 else self.base / 2
        pto = self.srtt_at(t) + max(4 * var, 1_000.0) + MAX_ACK_DELAY_US
        return PERSISTENT_CONGESTION_THRESHOLD * pto


def _base_rtt(gt: GroundTruth) -> float:
    """The first phase's configured round trip (µs); 0 when the header has none."""
    phases = gt.header.get("schedule", {}).get("phases") or [{}]
    p = phases[0]
    return float(p.get("c2s", {}).get("delay_us", 0) + p.get("s2c", {}).get("delay_us", 0))


def _dedup(records: list[PacketRecord]) -> list[PacketRecord]:
    """Records once each, in arrival order."""
    return sorted({r.idx: r for r in records}.values(), key=lambda r: r.arr_us)


def _uniq(values) -> tuple[str, ...]:
    """Distinct non-empty values, first-seen order."""
    return tuple(dict.fromkeys(v for v in values if v))
