"""How well the window the capture implies bounds the one a stack logs (issue 20).

A sender whose log has no congestion window (a browser's NetLog, a closed server
behind the interop contract) still shows its flight on the wire: every ack-eliciting
byte it sent and every ACK that came back. join.wire_trace turns that into a window
estimate, the largest bytes in flight within each smoothed RTT; since a sender may
not exceed its window by more than a datagram, the estimate is a lower bound, loose
wherever the sender is application- or pacing-limited. `compare` measures both sides
of that on a run whose stack does log its window: how often the estimate broke the
bound (it should not, but for clock noise and accounting differences) and how close
it came (the ratio estimate / logged). bench/derived_window.py prints the figures per
stack (BENCHMARKS.md, "The window from the wire").
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass

from harness.observe.derive import _offset
from harness.observe.events import Metrics, Trace


@dataclass(frozen=True)
class WindowAgreement:
    """The wire's window estimates against the logged window over the same intervals."""

    #: Estimates compared (one per smoothed RTT of the capture with a logged window).
    samples: int
    #: Estimates above the largest logged window of their interval by more than a datagram.
    above: int
    #: The most any estimate exceeded that window by, bytes (≤ 0: the bound always held).
    worst_excess: int
    #: estimate / logged window: the median and the 90th percentile (1.0 is exact).
    ratio_median: float
    ratio_p90: float

    @property
    def held(self) -> float:
        """The fraction of estimates that were a lower bound (within one datagram)."""
        return 1.0 - self.above / self.samples if self.samples else 0.0


def compare(logged: Trace, wire: Trace, datagram: int) -> WindowAgreement:
    """Each wire estimate (wire_trace's congestion_window, closing an interval of one
    smoothed RTT) against the largest window `logged` held during that interval and
    the one before, the two clocks aligned on the packets both saw sent
    (derive._offset)."""
    offset, slack = _offset(logged, wire)
    steps = [(m.t_us + offset, m.congestion_window) for m in logged.of(Metrics) if m.congestion_window is not None]
    if not steps:
        return WindowAgreement(0, 0, 0, 0.0, 0.0)
    times = [t for t, _ in steps]
    estimates = [(m.t_us, m.congestion_window) for m in wire.of(Metrics) if m.congestion_window is not None]
    ratios, above, worst, bounds = [], 0, None, []
    for t, est in estimates:
        bounds.append(t)
        # An interval's flight includes what was still in flight when it began, sent
        # under the window of the interval before (a reduction leaves more in flight
        # than the new window): the bound is the largest window of both intervals.
        start = bounds[max(len(bounds) - 3, 0)]
        i = max(bisect.bisect_right(times, start - slack) - 1, 0)
        k = bisect.bisect_right(times, t + slack)
        if times[i] > t + slack:
            continue  # before the stack logged any window
        cwnd = max(w for _, w in steps[i:max(k, i + 1)])
        if cwnd <= 0 or est <= 0:
            continue
        excess = est - cwnd
        worst = excess if worst is None else max(worst, excess)
        above += excess > datagram
        ratios.append(est / cwnd)
    if not ratios:
        return WindowAgreement(0, 0, 0, 0.0, 0.0)
    ratios.sort()
    return WindowAgreement(len(ratios), above, int(worst), statistics.median(ratios),
                           ratios[min(len(ratios) - 1, int(0.9 * len(ratios)))])
