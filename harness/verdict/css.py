"""HyStart++ (RFC 9406 §4.2) against a known step of the round trip: when slow start
should have left for conservative slow start (CSS), and when a CSS stretch should
have gone back to slow start because the round trip fell below the baseline it was
entered on. Pure functions over the sender's RTT samples (read from the wire: the
arrival of an ACK that newly acknowledges its largest, ack-eliciting packet, minus
that packet's send) and the stretches its log names, so the judgement is unit-tested
on made-up traces (tests/test_css_step.py): no stack in the mutant zoo's reach
(aioquic) logs conservative slow start, so a planted bug cannot show it failing.

Rounds are HyStart++'s own (a round ends when a packet sent at its start is
acknowledged), which the wire does not show; the bounds below count them as round
trips of the step's longer path, with the RFC's N_RTT_SAMPLE samples counted as ACKs.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.verdict import outcomes
from harness.verdict.deviation import check

#: RFC 9406 §4.3's constants: MIN_RTT_THRESH, MAX_RTT_THRESH, N_RTT_SAMPLE.
MIN_RTT_THRESH_US, MAX_RTT_THRESH_US, N_RTT_SAMPLE = 4_000, 16_000, 8
#: The raw state name the stacks that log conservative slow start give it.
CSS = "conservative_slow_start"


def rtt_thresh_us(last_round_min_rtt_us: float) -> float:
    """RFC 9406 §4.2: RttThresh = max(MIN_RTT_THRESH, min(lastRoundMinRTT / 8, MAX_RTT_THRESH))."""
    return max(MIN_RTT_THRESH_US, min(last_round_min_rtt_us / 8, MAX_RTT_THRESH_US))


@dataclass(frozen=True)
class Stretch:
    """A stretch the sender logged as conservative slow start: from `start_us` to
    `end_us` (the next state it logged, or the trace's end), and that next state,
    normalised (None if the trace ended in CSS)."""

    start_us: float
    end_us: float
    then: str | None


def stretches(states: list[tuple[float, str | None, str]], end_of_trace_us: float) -> list[Stretch]:
    """The CSS stretches of a log's states [(t, raw, state)]: a stretch runs from a
    CSS state to the next state that is not CSS."""
    out, start = [], None
    for t, raw, state in states:
        if raw == CSS:
            start = t if start is None else start
        elif start is not None:
            out.append(Stretch(start, t, state))
            start = None
    if start is not None:
        out.append(Stretch(start, end_of_trace_us, None))
    return out


def first_sample(samples: list[tuple[float, float]], sent_after_us: float, *, at_least_us: float = float("-inf"),
                 below_us: float = float("inf")) -> float | None:
    """When the first RTT sample (arrival, RTT) of a packet sent at or after
    `sent_after_us`, of at least `at_least_us` (or below `below_us`), reached the
    sender. By the send, not the arrival: an ACK the receiver delayed raises one sample
    from before the step, and a packet that waited behind the step raises one after."""
    return next((t for t, rtt in samples if t - rtt >= sent_after_us and at_least_us <= rtt < below_us), None)


@dataclass(frozen=True)
class Step:
    """What the sender's samples show of a delay step: the least RTT before it (its
    min_rtt, a floor under every round's minimum), RttThresh from that floor, the first
    sample risen by RttThresh (`rise_us`) and the first after the step that is below
    floor + RttThresh again (`fall_us`), and the longer path's round trip."""

    floor_us: float
    thresh_us: float
    rise_us: float | None
    fall_us: float | None
    long_rtt_us: float


def read_step(samples: list[tuple[float, float]], start_us: float, end_us: float, extra_us: float) -> Step | None:
    """The step of `extra_us` the link put on the data direction from `start_us` to
    `end_us`, as the sender's samples show it (the link's clock is the capture's, and
    the capture is the sender's side of the link); None without a sample of a packet
    sent before it."""
    before = [rtt for t, rtt in samples if t - rtt < start_us]
    if not before:
        return None
    floor = min(before)
    thresh = rtt_thresh_us(floor)
    rise = first_sample(samples, start_us, at_least_us=floor + thresh)
    # Every round's minimum in the step is at least floor + RttThresh (a CSS baseline
    # can be no lower): a sample below it, of a packet sent after the step, proves the fall.
    fall = first_sample(samples, end_us, below_us=floor + thresh)
    return Step(floor, thresh, rise, fall, floor + extra_us)


def exit_deadline_us(step: Step) -> float:
    """RFC 9406 §4.2's example enters CSS in the round whose minimum RTT exceeds the
    last one's by RttThresh: the round under way at the first risen sample ends
    within a longer round trip of it, and the next, wholly risen, has N_RTT_SAMPLE
    samples within another."""
    assert step.rise_us is not None
    return step.rise_us + 2 * step.long_rtt_us


def n_samples_after(acks_us: list[float], after_us: float, n: int = 2 * N_RTT_SAMPLE) -> float | None:
    """When the n-th ACK with a sample at or after `after_us` arrived (None if the
    transfer had fewer). By twice N_RTT_SAMPLE, a CSS round has counted N_RTT_SAMPLE
    samples with the fallen one among them and checked its minimum against the
    baseline: the round under way counts its eighth, or ends first and the next one,
    all of whose samples came after the fall, counts eight of its own."""
    later = [t for t in acks_us if t >= after_us]
    return later[n - 1] if len(later) >= n else None


def judge_entry(target_id: str, step: Step, states: list[tuple[float, str | None, str]],
                first_drop_us: float | None, slack_us: float) -> None:
    """RFC 9406 §4.2's delay-increase exit on the step: slow start ends (a logged CSS
    state, or congestion avoidance or recovery) after the first risen sample (less the
    log's ordering slack) and by exit_deadline_us. Not exercised when nothing rose,
    the step fell or the link dropped a datagram before the deadline, or slow start
    had ended before the step."""
    if step.rise_us is None:
        outcomes.not_exercised("no RTT sample rose by RttThresh during the step")
    deadline = exit_deadline_us(step)
    if step.fall_us is not None and step.fall_us < deadline:
        outcomes.not_exercised("the step fell before two longer round trips had passed")
    if first_drop_us is not None and first_drop_us < deadline:
        outcomes.not_exercised(f"the link dropped a datagram at {first_drop_us / 1e6:.3f} s, before the bound")
    exits = [t for t, raw, state in states if raw == CSS or state in ("CongestionAvoidance", "Recovery")]
    early = [t for t in exits if t < step.rise_us - slack_us]
    if early:
        outcomes.not_exercised(f"slow start had already ended at {early[0] / 1e6:.3f} s, before the step's "
                               "first risen sample")
    exit_us = min(exits, default=None)
    check(exit_us is not None and exit_us <= deadline + slack_us, "no-css-on-the-delay-rise", lambda: (
        f"{target_id}: every RTT sample from t={step.rise_us / 1e6:.3f} s was at least "
        f"{step.thresh_us / 1e3:.1f} ms (RttThresh) above the {step.floor_us / 1e3:.1f} ms before the step, "
        + (f"and slow start ended only at {exit_us / 1e6:.3f} s" if exit_us is not None
           else "and slow start never ended")
        + f"; RFC 9406 §4.2's example enters conservative slow start in the round that rose, by "
        f"{deadline / 1e6:.3f} s"
    ), rise_us=step.rise_us, exit_us=exit_us if exit_us is not None else -1, thresh_us=step.thresh_us)


def judge_resume(target_id: str, step: Step, spans: list[Stretch], acks_us: list[float],
                 first_drop_us: float | None, slack_us: float) -> None:
    """RFC 9406 §4.2's spurious exit: a stretch of CSS begun on the step and under way
    at its fall ends, in slow start, by the 2 × N_RTT_SAMPLE-th sample after the fall.
    Not exercised without such a stretch, such samples, or with a drop before them; a
    stretch that ended otherwise before them may have run out of rounds first."""
    if step.rise_us is None or step.fall_us is None:
        outcomes.not_exercised("the sender's samples show no rise by RttThresh and fall after it")
    # The stretch the fall ends may be logged as ended a little before the capture
    # shows the sample that ended it (the log's clock and the capture's).
    under_way = [s for s in spans if step.rise_us - slack_us <= s.start_us <= step.fall_us <= s.end_us + slack_us]
    if not under_way:
        outcomes.not_exercised(f"no stretch of conservative slow start began on the step and was under way "
                               f"at its fall ({step.fall_us / 1e6:.3f} s)")
    stretch = under_way[0]
    by = n_samples_after(acks_us, step.fall_us)
    if by is None:
        outcomes.not_exercised(f"the transfer ended within {2 * N_RTT_SAMPLE} samples of the fall")
    if first_drop_us is not None and first_drop_us < by:
        outcomes.not_exercised(f"the link dropped a datagram at {first_drop_us / 1e6:.3f} s, before the bound")
    if stretch.end_us <= by + slack_us and stretch.then != "SlowStart":
        outcomes.not_exercised(f"the stretch ended at {stretch.end_us / 1e6:.3f} s in {stretch.then} before "
                               f"{2 * N_RTT_SAMPLE} samples had followed the fall (its rounds may have run out first)")
    check(stretch.end_us <= by + slack_us, "css-kept-after-the-delay-fell", lambda: (
        f"{target_id}: conservative slow start from t={stretch.start_us / 1e6:.3f} s (the round trip rose "
        f"by RttThresh = {step.thresh_us / 1e3:.1f} ms at {step.rise_us / 1e6:.3f} s) outlived the fall: from "
        f"{step.fall_us / 1e6:.3f} s the samples were below {(step.floor_us + step.thresh_us) / 1e3:.1f} ms, "
        f"under any baseline it was entered on, yet it "
        + (f"lasted until {stretch.end_us / 1e6:.3f} s, then {stretch.then}" if stretch.then
           else "lasted to the end of the trace")
        + f"; RFC 9406 §4.2's example resumes slow start by the {2 * N_RTT_SAMPLE}th sample after it "
        f"({by / 1e6:.3f} s)"
    ), fall_us=step.fall_us, end_us=stretch.end_us, bound_us=by)
