"""HyStart++ (RFC 9406 §4.2) on a step of the round trip in early slow start
(strategies.delay_steps): the data direction's delay rises by 20-40 ms for a few
rounds, then falls back, on a 50 Mbit/s link with a deep queue that slow start has
not yet filled. The RFC's example algorithm enters conservative slow start (CSS) in
the round whose minimum RTT rose by RttThresh, and goes back to slow start once a CSS
round's minimum falls below the baseline it was entered on: that exit was spurious.

Both are the RFC's example algorithm (EXAMPLE in spec/requirements.toml), judged
where the sender's log names conservative slow start (the `conservative_slow_start`
capability: quiche); from outside, a stretch of CSS looks like slower slow start and
its end like anything else. The RTT samples are the sender's as the wire shows them
(harness/verdict/css.py).
"""

from __future__ import annotations

from hypothesis import example, given

from harness.observe.events import CongestionState
from harness.schedule import strategies
from harness.verdict import analysis, css, outcomes
from properties.test_hystart import CSS_PLAN, _judged_where_css_is_logged

#: test_hystart's 4 MB: slow start, the step (over by 0.75 s at the latest), CSS and the
#: return all fit in it (about 1 s at 50 Mbit/s).
STEP_PLAN = CSS_PLAN
#: The explicit example: 80 ms, 30 ms more from 3.5 round trips in, for three of the
#: longer round trips.
STEP_EXAMPLE = strategies.delay_step(strategies.BaseLink(rate_bps=50_000_000, rtt_us=80_000), 0, 280, 330, 30)
#: The same step, two of the longer round trips long: it falls soon after conservative
#: slow start begins.
SHORT_STEP_EXAMPLE = strategies.delay_step(strategies.BaseLink(rate_bps=50_000_000, rtt_us=80_000), 0, 280, 220, 30)


def _observed(obs, target, schedule):
    """The sender's samples, its CSS stretches, the step as they show it, the first
    drop of the data direction, and how far apart its log and the capture may order
    one instant."""
    step = strategies.step_of(schedule)
    assert step is not None, "the property runs on delay_step schedules only"
    acks = [a for a in analysis.acks_received(obs.wire) if a.space == "application" and a.gives_sample]
    samples = [(a.t_us, a.sample_us) for a in acks]
    trace = obs.sender
    end_of_trace = max((e.t_us for e in trace.events), default=0.0)
    states = [(s.t_us, s.raw, s.state) for s in trace.of(CongestionState) if not s.inferred]
    seen = css.read_step(samples, step[0], step[1], step[2])
    if seen is None:
        outcomes.not_exercised("no RTT sample before the step")
    drops = [r.arr_us for r in obs.transfer_records() if r.fate == "dropped"]
    slack = analysis.log_order_slack_us(target, 2_000)
    return seen, css.stretches(states, end_of_trace), [t for t, _ in samples], min(drops, default=None), slack, \
        states


@example(schedule=STEP_EXAMPLE)
@given(schedule=strategies.delay_steps())
def test_conservative_slow_start_begins_in_the_round_the_delay_rose(longlook, target, schedule):
    """RFC 9406 §4.2 (example): "check to see if delay increase triggers slow start
    exit", entering conservative slow start in the round whose minimum RTT exceeds the
    last one's by RttThresh (max(4 ms, min(lastRoundMinRTT / 8, 16 ms))). A step of
    20-40 ms raises every round's minimum past it: slow start ends (CSS or another
    state) no sooner than the first risen sample reaches the sender and within two of
    the longer round trips after it (the round under way, then a wholly risen one).
    Trigger: the sender was in slow start when the step's samples came, nothing was
    dropped, and the step lasted past that bound."""
    _judged_where_css_is_logged(target)
    with longlook.run(target, schedule, STEP_PLAN) as obs:
        obs.completed()
        step, _, _, first_drop, slack, states = _observed(obs, target, schedule)
        css.judge_entry(target.id, step, states, first_drop, slack)


@example(schedule=SHORT_STEP_EXAMPLE)
@given(schedule=strategies.delay_steps(strategies.SHORT_STEP))
def test_conservative_slow_start_resumes_slow_start_when_the_delay_falls(longlook, target, schedule):
    """RFC 9406 §4.2 (example): in conservative slow start, "check to see if the
    current round's minRTT drops below baseline (cssBaselineMinRtt) indicating that
    slow start exit was spurious", and if so resume slow start. Once the step ends, a
    sample below the floor before it plus RttThresh is below any baseline the step's
    rounds set: within 2 × N_RTT_SAMPLE samples of it the stretch of CSS ends, in slow
    start. Trigger: a stretch of CSS that began on the step and was still under way
    when the first fallen sample came, with nothing dropped meanwhile."""
    _judged_where_css_is_logged(target)
    with longlook.run(target, schedule, STEP_PLAN) as obs:
        obs.completed()
        step, spans, acks, first_drop, slack, _ = _observed(obs, target, schedule)
        css.judge_resume(target.id, step, spans, acks, first_drop, slack)
