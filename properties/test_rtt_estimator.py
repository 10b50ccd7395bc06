"""The RTT estimator: RFC 9002 §5.3's exponentially weighted moving averages.

    first sample:  smoothed_rtt = latest_rtt;  rttvar = latest_rtt / 2
    then:          adjusted_rtt = latest_rtt, less the ACK Delay where that leaves at
                                  least min_rtt
                   rttvar       = 3/4 · rttvar + 1/4 · |smoothed_rtt − adjusted_rtt|
                   smoothed_rtt = 7/8 · smoothed_rtt + 1/8 · adjusted_rtt

The RFC gives these as its example algorithm (EXAMPLE strength in spec/requirements.
toml): a stack with other gains deviates from the example, it violates no MUST.

Judged from the sender's own log, one RTT sample at a time: where its smoothed_rtt
moved and exactly one ACK frame that gives a sample (harness/verdict/analysis.py)
arrived since the last move, the move implies the adjusted sample the sender fed
its average, smoothed_rtt_before + (smoothed_rtt_after − smoothed_rtt_before) · 8.
Whatever the ACK Delay, §5.3 puts that sample between min(latest_rtt, min_rtt) and
latest_rtt (an adjusted sample is the raw one, or a smaller one of at least min_rtt;
a stack that logs the adjusted sample as latest_rtt, aioquic and quic-go, is then
held to it exactly). Where the sender also logs rttvar, its move must equal a
quarter of the distance from the old average to that sample. Two samples between
two logged moves cannot be told apart, so such a move is not judged.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from harness.observe.events import Metrics
from harness.schedule import strategies
from harness.verdict import analysis, outcomes
from harness.verdict.deviation import deviation, raise_all
from properties.test_rtt import JITTER, PLAN, SAME_US, explains, joined

#: §5.3's gains.
SRTT_GAIN, RTTVAR_GAIN = 1 / 8, 1 / 4


def _steps(trace):
    """(before, after) pairs of the sender's RTT state at each move of its smoothed
    RTT or its rttvar: (t_us, smoothed, rttvar, latest, min_rtt), each field its
    latest report."""
    state = {"srtt": None, "var": None, "latest": None, "min": None}
    out, prev = [], None
    for m in trace.of(Metrics):
        # A sample equal to the average leaves smoothed_rtt where it was and moves rttvar only.
        moved = any(new is not None and new != state[key]
                    for key, new in (("srtt", m.smoothed_rtt_us), ("var", m.rtt_variance_us)))
        for key, value in (("srtt", m.smoothed_rtt_us), ("var", m.rtt_variance_us), ("latest", m.latest_rtt_us),
                           ("min", m.min_rtt_us)):
            if value is not None:
                state[key] = value
        if not moved or state["latest"] is None or state["srtt"] is None:
            continue
        now = (m.t_us, state["srtt"], state["var"], state["latest"], state["min"])
        out.append((prev, now))
        prev = now
    return out


def judge_estimator(target_id: str, trace, frames, mad_us: float, join) -> tuple[int, list]:
    """(moves judged, deviations): each move of smoothed_rtt with exactly one sample-
    giving ACK frame since the move before, held to §5.3's update (module docstring);
    the first, to the first sample's rule."""
    samples = [f for f in frames if f.gives_sample]
    # A logged value reads up to SAME_US off; the implied sample multiplies that by 8.
    tol = 2 * SAME_US / SRTT_GAIN + join.below_us
    var_tol = 2 * SAME_US / RTTVAR_GAIN + tol
    judged, found, lowest = 0, [], None
    for before, after in _steps(trace):
        t, srtt, var, latest, min_rtt = after
        lowest = latest if lowest is None else min(lowest, latest)
        floor = min_rtt if min_rtt is not None else lowest
        if before is None:
            judged += 1
            if abs(srtt - latest) > tol or (var is not None and abs(var - latest / 2) > var_tol):
                found.append(deviation("rtt-first-sample", (
                    f"{target_id}: the first sample's smoothed_rtt {srtt / 1e3:.3f} ms (rttvar "
                    f"{'none' if var is None else f'{var / 1e3:.3f}'} ms) at t={t / 1e6:.6f} s is not the sample "
                    f"{latest / 1e3:.3f} ms (and half of it), RFC 9002 §5.3's first-sample rule"),
                    srtt_over_sample=srtt / latest))
            continue
        # The one sample since the last move, and it gave the logged sample; the frame
        # before it gave the last move's (in real time a frame is handled up to
        # join.lag_us after it arrived, so each must be seen to give its own).
        between = [f for f in samples if before[0] + join.late_us < f.t_us <= t + join.late_us]
        earlier = [f for f in samples if f.t_us <= before[0] + join.late_us]
        if len(between) != 1 or not earlier or not explains(between[0], Metrics(t, latest_rtt_us=latest), mad_us, join) \
                or not explains(earlier[-1], Metrics(before[0], latest_rtt_us=before[3]), mad_us, join):
            continue
        t0, srtt0, var0 = before[0], before[1], before[2]
        implied = srtt0 + (srtt - srtt0) / SRTT_GAIN
        low, high = min(latest, floor), latest
        judged += 1
        if not low - tol <= implied <= high + tol:
            found.append(deviation("smoothed-rtt-not-the-example-average", (
                f"{target_id}: smoothed_rtt moved {srtt0 / 1e3:.3f} → {srtt / 1e3:.3f} ms at t={t / 1e6:.6f} s on "
                f"the sample of the ACK frame at t={between[0].t_us / 1e6:.6f} s (latest_rtt {latest / 1e3:.3f} ms, "
                f"min_rtt {floor / 1e3:.3f} ms): with the gain 1/8 that is a sample of {implied / 1e3:.3f} ms, "
                f"outside [{low / 1e3:.3f}, {high / 1e3:.3f}] ms"), implied_over_sample=implied / latest))
            continue
        if var is None or var0 is None:
            continue
        adjusted = min(max(implied, low), high)
        implied_dev = (var - (1 - RTTVAR_GAIN) * var0) / RTTVAR_GAIN
        if abs(implied_dev - abs(srtt0 - adjusted)) > var_tol:
            found.append(deviation("rttvar-not-the-example-average", (
                f"{target_id}: rttvar moved {var0 / 1e3:.3f} → {var / 1e3:.3f} ms at t={t / 1e6:.6f} s: with the "
                f"gain 1/4 that is a deviation of {implied_dev / 1e3:.3f} ms, where the sample of "
                f"{adjusted / 1e3:.3f} ms lies {abs(srtt0 - adjusted) / 1e3:.3f} ms from the average "
                f"{srtt0 / 1e3:.3f} ms (and {abs(floor - adjusted) / 1e3:.3f} ms from min_rtt)"),
                implied_over_distance=implied_dev / max(abs(srtt0 - adjusted), 1.0),
                # How far the move is from a variance of the distance to min_rtt instead
                # of to the average: what one stack's deviation is (F99).
                off_min_rtt_distance_us=abs(implied_dev - abs(floor - adjusted))))
    return judged, found


@example(schedule=JITTER)
@example(schedule=strategies.CLEAN_LINK)
@given(schedule=st.one_of(strategies.delay_jitter(), strategies.loss_only()))
def test_smoothed_rtt_is_the_example_average(longlook, target, schedule):
    """RFC 9002 §5.3 (its example estimator): the first sample sets smoothed_rtt (and
    rttvar to half of it); every later one moves smoothed_rtt by 1/8 of the way to the
    adjusted sample and rttvar by 1/4 of the way to their distance. Trigger: a move of
    the logged smoothed_rtt with one sample-giving ACK frame since the move before."""
    outcomes.require(target, "rtt_samples")
    outcomes.require(target, "smoothed_rtt")
    with longlook.run(target, schedule, PLAN) as obs:
        trace, frames, mad, join = joined(obs, target)
        judged, found = judge_estimator(target.id, trace, frames, mad, join)
        if not judged:
            outcomes.not_exercised(f"no move of smoothed_rtt could be joined to one RTT sample "
                                   f"({sum(f.gives_sample for f in frames)} sample-giving ACK frames)")
        # One deviation per kind: the first of each, with how many moves broke it.
        kinds: dict[str, list] = {}
        for d in found:
            kinds.setdefault(d.kind, []).append(d)
        for ds in kinds.values():
            ds[0].args = (f"{ds[0].args[0]}; {len(ds)} of {judged} moves judged so",)
        raise_all([ds[0] for ds in kinds.values()])
