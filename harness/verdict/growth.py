"""Where a sender's window growth changes pace, read from its log and the wire:
the end of slow start where the log names no state, and the first congestion
avoidance stage after a collapse or a cut, and how far above a bound the window
went in it. Shared by the HyStart++, persistent congestion and CUBIC epoch
properties."""

from __future__ import annotations

from collections.abc import Callable

from harness.observe.reductions import undone
from harness.run import Inconclusive
from harness.verdict import analysis


def growth_slowed_at(obs, trace, t_from_us: float, t_to_us: float, span_us: float) -> float | None:
    """The start of the first span of `span_us` from `t_from_us` in which the window
    grew by at most half the bytes newly acknowledged on the wire (at least four
    datagrams of them): conservative slow start (RFC 9406 §4.2) or congestion
    avoidance, where the log names neither (tquic)."""
    series = analysis.cwnd_series(trace)
    mss = analysis.max_datagram(trace)

    def window_at(t: float) -> int | None:
        return next((w for s, w, *_ in reversed(series) if s <= t), None)

    t = max(t_from_us, series[0][0]) if series else t_to_us
    while t + span_us <= t_to_us:
        w0, w1 = window_at(t), window_at(t + span_us)
        try:
            acked = analysis.bytes_newly_acknowledged(obs.wire, t, t + span_us)
        except Inconclusive:
            return None
        if w0 is not None and w1 is not None and acked >= 4 * mss and w1 - w0 <= acked / 2:
            return t
        t += span_us
    return None


def avoidance_starts(obs, trace, after_us: float, t_to_us: float, span_us: float) -> tuple[float, int] | None:
    """(time, window) at which the slow start that follows `after_us` ends: the first
    window at or above the ssthresh the sender logged after `after_us`, where it logs
    one (a stack's own word for where congestion avoidance begins), else where growth
    slowed to at most half the bytes acknowledged (`growth_slowed_at`). None if it
    never ends before `t_to_us`."""
    series = [s for s in analysis.cwnd_series(trace) if after_us < s[0] <= t_to_us]
    logged = next(((t, c) for t, c, _, ss in series if ss is not None and c >= ss), None)
    if logged is not None:
        return logged
    slowed = growth_slowed_at(obs, trace, after_us, t_to_us, span_us)
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
