"""Where a sender's window growth changes pace, read from its log and the wire:
the end of slow start where the log names no state, and the first congestion
avoidance stage after a collapse or a cut, and how far above a bound the window
went in it. Shared by the HyStart++, persistent congestion and CUBIC epoch
properties."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from harness.observe.reductions import undone
from harness.run import Inconclusive
from harness.verdict import analysis


def growth_slowed_at(obs, trace, t_from_us: float, t_to_us: float, span_us: float,
                     sent_after_us: float | None = None) -> float | None:
    """The start of the first span of `span_us` from `t_from_us` in which the window
    grew by at most half the bytes newly acknowledged on the wire (at least four
    datagrams of them; of packets sent after `sent_after_us`, if given): conservative
    slow start (RFC 9406 §4.2) or congestion avoidance, where the log names neither
    (tquic)."""
    series = analysis.cwnd_series(trace)
    mss = analysis.max_datagram(trace)

    def window_at(t: float) -> int | None:
        return next((w for s, w, *_ in reversed(series) if s <= t), None)

    t = max(t_from_us, series[0][0]) if series else t_to_us
    while t + span_us <= t_to_us:
        w0, w1 = window_at(t), window_at(t + span_us)
        try:
            acked = analysis.bytes_newly_acknowledged(obs.wire, t, t + span_us, sent_after_us=sent_after_us)
        except Inconclusive:
            return None
        if w0 is not None and w1 is not None and acked >= 4 * mss and w1 - w0 <= acked / 2:
            return t
        t += span_us
    return None


def avoidance_starts(obs, trace, after_us: float, t_to_us: float, span_us: float,
                     sent_after_us: float | None = None) -> tuple[float, int] | None:
    """(time, window) at which the slow start that follows `after_us` ends: the first
    window at or above the ssthresh the sender logged after `after_us`, where it logs
    one (a stack's own word for where congestion avoidance begins), else where growth
    slowed to at most half the bytes acknowledged (`growth_slowed_at`). None if it
    never ends before `t_to_us`."""
    series = [s for s in analysis.cwnd_series(trace) if after_us < s[0] <= t_to_us]
    logged = next(((t, c) for t, c, _, ss in series if ss is not None and c >= ss), None)
    if logged is not None:
        return logged
    slowed = growth_slowed_at(obs, trace, after_us, t_to_us, span_us, sent_after_us)
    if slowed is None:
        return None
    return slowed, next((c for t, c, *_ in reversed(analysis.cwnd_series(trace)) if t <= slowed), 0)


def standing_cuts(trace, mss: int) -> tuple[list, list]:
    """(every reduction, the cuts among them a curve follows): not a collapse to
    about kMinimumWindow, and not one the sender undid (reductions.undone)."""
    every = analysis.reductions(trace)
    gone = {every[i] for i in undone(trace)}
    return every, [c for c in every if c.after > 3 * mss and c not in gone]


def stage_after(trace, sends: list[float], series: list[tuple[float, int]], every: list, cut,
                max_s: float, min_s: float) -> tuple[float, float] | None:
    """(least smoothed RTT logged after `cut`, end) of the congestion avoidance stage
    the cut begins: `max_s` long at most, and over at the next reduction of `every`
    or when the data runs out (the last ack-eliciting send of `sends`, less that RTT:
    its acknowledgement is the last growth). The least RTT counts the most round
    trips, so it allows the most Reno-friendly growth. None when no RTT was logged
    after the cut or the stage is shorter than `min_s`."""
    rtts = [r for t, r in analysis.smoothed_rtt_us(trace) if t > cut.t_us]
    if not rtts or not series:
        return None
    srtt = min(rtts)
    last = min(series[-1][0], (sends[-1] if sends else 0.0) - srtt)
    again = next((c.t_us for c in every if c.t_us > cut.t_us), last)
    t_end = min(cut.t_us + max_s * 1e6, again, last)
    return (srtt, t_end) if t_end - cut.t_us >= min_s * 1e6 else None


def worst_over(series: list[tuple[float, int]], t_from_us: float, t_to_us: float,
               bound: Callable[[float], float]) -> tuple[float, int] | None:
    """The logged (time, window) in (t_from_us, t_to_us] furthest above `bound(t)`,
    by ratio; None when every one is within it."""
    judged = [(t, c) for t, c in series if t_from_us < t <= t_to_us]
    worst = max(judged, key=lambda tc: tc[1] / bound(tc[0]), default=None)
    return worst if worst is not None and worst[1] > bound(worst[0]) else None


@dataclass(frozen=True)
class SlowStartStretch:
    """The first stretch of a connection's slow start the sender spent with its
    flight at its window: from `start_us` to `end_us`, the window `before` at the
    start grew by `grown` while the wire newly acknowledged `acked` bytes of its
    ack-eliciting application packets."""

    start_us: float
    end_us: float
    before: int
    grown: int
    acked: int

    @property
    def per_byte(self) -> float:
        return self.grown / self.acked if self.acked else 0.0


def initial_slow_start(obs, trace, span_us: float, ends: list[float], mss: int) -> SlowStartStretch | str:
    """The stretch of initial slow start that growth rules judge: from the first time
    the flight reaches the logged window (before that the sender is not cwnd-limited,
    and RFC 9002 §7.8 lets it not grow) for `span_us`, cut at the first of `ends`
    after the start (a declared loss, an exit the log names, whatever else the rule
    excludes). A string says why there is none (not exercised)."""
    from harness.observe.events import Metrics

    cwnd, start, before = None, None, None
    for m in trace.of(Metrics):
        cwnd = m.congestion_window if m.congestion_window is not None else cwnd
        if cwnd is not None and m.bytes_in_flight is not None and m.bytes_in_flight >= cwnd - 2 * mss:
            start, before = m.t_us, cwnd
            break
    if start is None:
        return "the sender's flight never reached its logged window"
    end = min([start + span_us, *(t for t in ends if t > start)])
    inside = [m.congestion_window for m in trace.of(Metrics) if start <= m.t_us <= end and m.congestion_window is not None]
    try:
        acked = analysis.bytes_newly_acknowledged(obs.wire, start, end)
    except Inconclusive as e:
        return f"the capture could not be read for the bytes acknowledged: {e}"
    if acked < 4 * mss:
        return (f"under 4 datagrams acknowledged in the {(end - start) / 1e3:.0f} ms after the flight first reached "
                "the window")
    return SlowStartStretch(start, end, before, max(inside, default=before) - before, acked)


#: How far from an ACK's time on the wire the stack's log of processing it is looked
#: for, µs: the capture and the log read one clock, but a log may round its times
#: (ngtcp2 to the millisecond) or write them late (kwik, 0.5-2.3 ms in real time).
LOG_BEFORE_US = 1_000
LOG_AFTER_US = 5_000
#: How far the log's flight after an ACK may differ from the wire's and still be that
#: ACK's line, bytes: the two count the same packets' sizes.
FLIGHT_MATCH_B = 64


@dataclass(frozen=True)
class LimitedGrowth:
    """The ACKs that reached a sender while its flight filled its window, each as
    (wire time, bytes it newly acknowledged, the window's growth with it)."""

    per_ack: tuple[tuple[float, int, int], ...]

    def of(self, least_acked: int = 0) -> "LimitedGrowth":
        """Those of the ACKs that newly acknowledged at least `least_acked` bytes."""
        return LimitedGrowth(tuple(a for a in self.per_ack if a[1] >= least_acked))

    @property
    def acks(self) -> int:
        return len(self.per_ack)

    @property
    def acked(self) -> int:
        return sum(a for _, a, _ in self.per_ack)

    @property
    def grown(self) -> int:
        return sum(g for _, _, g in self.per_ack)

    @property
    def per_byte(self) -> float:
        return self.grown / self.acked if self.acked else 0.0


def cwnd_limited_growth(obs, trace, t_from_us: float, t_to_us: float, mss: int) -> LimitedGrowth:
    """The window's growth with each ACK between the two times that reached the
    sender while it was cwnd-limited: the wire's flight just before the ACK within a
    datagram of the window the sender held. RFC 9002 §7.8 has a sender whose window is
    not full not grow it, and stacks read "full" strictly (kwik grows only then), so
    only those ACKs are counted; a paced sender below its window (which should grow)
    is counted less, never wrongly.

    The ACKs, the packets they newly acknowledge, their sizes (ack-eliciting
    application packets) and the flight are the wire's (join.wire_trace); the window
    is the log's. Times alone cannot pair an ACK with the log line of its processing
    where ACKs come a millisecond apart and a log rounds or lags by as much, so the
    line is the first near the ACK's time whose flight is the wire's flight after that
    ACK: the ACK's growth is that line's window less the previous ACK's line's. An
    ACK with no such line (a stack that logs no flight) is not counted."""
    from harness.observe.events import Metrics, PacketAcked, PacketSent
    from harness.observe.join import wire_trace

    conn = analysis.busiest_connection(obs.wire)
    if conn is None:
        return LimitedGrowth(())
    wire = wire_trace(obs.wire, conn)
    sizes = {(p.space, p.pn): p.size or 0 for p in wire.of(PacketSent) if p.ack_eliciting}
    flights = [(m.t_us, m.bytes_in_flight) for m in wire.of(Metrics) if m.bytes_in_flight is not None]
    flight_times = [t for t, _ in flights]
    logs: list[tuple[float, int, int]] = []
    window = None
    for m in trace.of(Metrics):
        window = m.congestion_window if m.congestion_window is not None else window
        if window is not None and m.bytes_in_flight is not None:
            logs.append((m.t_us, window, m.bytes_in_flight))
    log_times = [t for t, *_ in logs]

    def wire_flight(t: float, after: bool) -> int | None:
        i = (bisect.bisect_right if after else bisect.bisect_left)(flight_times, t) - 1
        return flights[i][1] if i >= 0 else None

    def window_at(t: float) -> int | None:
        i = bisect.bisect_right(log_times, t) - 1
        return logs[i][1] if i >= 0 else None

    # A packet sent with the window full: stacks judge §7.8 per packet (was the
    # window full when it left?) or per round as well as at the ACK (ngtcp2, kwik).
    sent_full = {(p.space, p.pn): (w := window_at(p.t_us + LOG_BEFORE_US)) is not None
                 and (f := wire_flight(p.t_us, after=True)) is not None and f >= w - mss
                 for p in wire.of(PacketSent) if p.ack_eliciting}
    per_ack: dict[float, int] = {}
    every_full: dict[float, bool] = {}
    for a in wire.of(PacketAcked):
        if a.space == "application" and (a.space, a.pn) in sizes:
            per_ack[a.t_us] = per_ack.get(a.t_us, 0) + sizes[(a.space, a.pn)]
            every_full[a.t_us] = every_full.get(a.t_us, True) and sent_full[(a.space, a.pn)]

    out = []
    last = -1  # index of the log line matched to the previous ACK
    for t in sorted(x for x in per_ack if t_from_us <= x < t_to_us):  # the ACK at t_to_us ends it
        flight_after = wire_flight(t, after=True)
        lo = max(bisect.bisect_left(log_times, t - LOG_BEFORE_US), last + 1)
        hi = bisect.bisect_right(log_times, t + LOG_AFTER_US)
        j = next((k for k in range(lo, hi) if flight_after is not None
                  and abs(logs[k][2] - flight_after) <= FLIGHT_MATCH_B), None)
        if j is None:
            continue
        held = logs[last][1] if last >= 0 else logs[max(lo - 1, 0)][1]
        flight_before = wire_flight(t, after=False)
        if flight_before is not None and flight_before >= held - mss and every_full[t]:
            out.append((t, per_ack[t], logs[j][1] - held))
        last = j
    return LimitedGrowth(tuple(out))


def last_collapse(cuts: list, series: list[tuple[float, int]], after_us: float, mss: int):
    """The collapse to about kMinimumWindow (from eight datagrams or more) the outage
    beginning at `after_us` brought, or None. A sender that collapses on a timer inside
    the outage (picoquic) may do so again before it regrows: the last of that chain,
    after which the window grows past eight datagrams, is the one a regrowth follows."""
    collapse = next((c for c in cuts if c.t_us >= after_us and c.after <= 3 * mss and c.before >= 8 * mss), None)
    if collapse is None:
        return None
    for again in (c for c in cuts if c.t_us > collapse.t_us and c.after <= 3 * mss):
        if any(collapse.t_us < t < again.t_us and w > 8 * mss for t, w in series):
            break
        collapse = again
    return collapse
