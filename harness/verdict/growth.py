"""Where a sender's window growth changes pace, read from its log and the wire:
the end of slow start where the log names no state, and the first congestion
avoidance stage after a collapse. Shared by the HyStart++ and the persistent
congestion properties."""

from __future__ import annotations

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
