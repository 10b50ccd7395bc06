"""harness/verdict/css.py: HyStart++'s thresholds and the judgement of a delay step,
on made-up samples and states."""

import pytest

from harness.schedule import strategies
from harness.verdict import css
from harness.verdict.deviation import Deviation
from harness.verdict.outcomes import NotExercised


def test_rtt_thresh_is_an_eighth_of_the_last_round_clamped_to_4_and_16_ms():
    assert css.rtt_thresh_us(20_000) == 4_000
    assert css.rtt_thresh_us(80_000) == 10_000
    assert css.rtt_thresh_us(400_000) == 16_000


def test_stretches_run_from_css_to_the_next_other_state():
    states = [(0, "slow_start", "SlowStart"), (100, css.CSS, "SlowStart"), (150, css.CSS, "SlowStart"),
              (300, "slow_start", "SlowStart"), (400, css.CSS, "SlowStart"),
              (500, "congestion_avoidance", "CongestionAvoidance"), (600, css.CSS, "SlowStart")]
    assert css.stretches(states, 900) == [css.Stretch(100, 300, "SlowStart"),
                                          css.Stretch(400, 500, "CongestionAvoidance"),
                                          css.Stretch(600, 900, None)]


def _samples(rtt_of, every=5_000, until=2_000_000):
    """A packet sent every 5 ms, its sample (arrival, RTT) with the RTT `rtt_of(send)`."""
    return [(t + rtt_of(t), rtt_of(t)) for t in range(0, until, every)]


def _step(t, start=300_000, end=700_000, rtt=80_000, extra=30_000, after=80_000):
    return rtt + extra if start <= t < end else (after if t >= end else rtt)


def test_read_step_finds_the_rise_and_the_fall_by_the_packets_sent_in_and_after_it():
    step = css.read_step(_samples(_step), 300_000, 700_000, 30_000)
    # Sent at 0.3 s, back 0.41 s later; sent at 0.7 s, back at 0.78 s.
    assert (step.floor_us, step.thresh_us, step.rise_us, step.fall_us) == (80_000, 10_000, 410_000, 780_000)
    assert step.long_rtt_us == 110_000
    assert css.exit_deadline_us(step) == 630_000


def test_a_delayed_ack_before_the_step_is_no_rise():
    # A packet sent at 0.25 s acknowledged 25 ms late (max_ack_delay): no step yet.
    samples = sorted([*_samples(_step), (250_000 + 105_000, 105_000)])
    assert css.read_step(samples, 300_000, 700_000, 30_000).rise_us == 410_000


def test_a_fall_that_stays_above_floor_plus_thresh_is_no_fall():
    # 95 ms after the step is not below the floor (80 ms) plus RttThresh (10 ms).
    step = css.read_step(_samples(lambda t: _step(t, after=95_000)), 300_000, 700_000, 30_000)
    assert step.rise_us == 410_000 and step.fall_us is None


def test_no_sample_before_the_step_reads_nothing():
    assert css.read_step([(500_000, 80_000)], 300_000, 700_000, 30_000) is None


def test_the_bound_is_the_sixteenth_sample_after_the_fall():
    acks = list(range(0, 1_000_000, 10_000))
    assert css.n_samples_after(acks, 500_000) == 650_000
    assert css.n_samples_after(acks, 950_000) is None


def test_delay_step_lengthens_the_data_direction_only_then_falls_back():
    s = strategies.delay_step(strategies.BaseLink(rate_bps=50_000_000, rtt_us=80_000), 0, 280, 330, 30)
    assert [(p.start_us, p.s2c.delay_us, p.c2s.delay_us) for p in s.phases] == [
        (0, 40_000, 40_000), (280_000, 70_000, 40_000), (610_000, 40_000, 40_000)]
    assert s.phases[0].s2c.queue_bytes == 8 * 500_000
    assert strategies.step_of(s) == (280_000, 610_000, 30_000)
    assert strategies.step_of(strategies.CLEAN_DEEP_LINK) is None


@pytest.mark.parametrize("rounds", [strategies.LONG_STEP, strategies.SHORT_STEP])
def test_delay_steps_last_the_rounds_asked_for(rounds):
    from hypothesis import given, settings

    @settings(max_examples=30, database=None)
    @given(strategies.delay_steps(rounds))
    def check(s):
        start, end, extra = strategies.step_of(s)
        rtt = 2 * s.phases[0].s2c.delay_us
        assert 3 * rtt - 1_000 <= start <= 4 * rtt + 1_000
        assert 20_000 <= extra <= 40_000
        assert rounds[0] * (rtt + extra) - 1_000 <= end - start <= rounds[1] * (rtt + extra) + 1_000

    check()


#: A step of 30 ms on an 80 ms path, read as the sender saw it: risen from 0.40 s,
#: fallen from 0.80 s; exit bound 0.62 s; an ACK with a sample every 10 ms.
STEP = css.Step(floor_us=80_000, thresh_us=10_000, rise_us=400_000, fall_us=800_000, long_rtt_us=110_000)
ACKS = list(range(0, 2_000_000, 10_000))
SS, CSS_STATE, CA = ("slow_start", "SlowStart"), (css.CSS, "SlowStart"), ("congestion_avoidance",
                                                                          "CongestionAvoidance")


def _states(*entries):
    return [(t, raw, state) for t, (raw, state) in entries]


def test_an_entry_into_css_in_the_risen_round_passes():
    css.judge_entry("s", STEP, _states((0, SS), (500_000, CSS_STATE)), None, 2_000)


def test_an_entry_after_two_longer_round_trips_fails():
    with pytest.raises(Deviation) as e:
        css.judge_entry("s", STEP, _states((0, SS), (700_000, CSS_STATE)), None, 2_000)
    assert e.value.kind == "no-css-on-the-delay-rise"


def test_no_exit_at_all_fails():
    with pytest.raises(Deviation):
        css.judge_entry("s", STEP, _states((0, SS)), None, 2_000)


def test_an_exit_before_the_rise_or_a_drop_before_the_bound_is_not_exercised():
    with pytest.raises(NotExercised):
        css.judge_entry("s", STEP, _states((0, SS), (300_000, CA)), None, 2_000)
    with pytest.raises(NotExercised):
        css.judge_entry("s", STEP, _states((0, SS), (700_000, CSS_STATE)), 600_000, 2_000)


def test_css_that_resumes_slow_start_after_the_fall_passes():
    css.judge_resume("s", STEP, [css.Stretch(450_000, 830_000, "SlowStart")], ACKS, None, 2_000)


def test_css_that_outlives_the_fall_fails():
    # The 16th sample after the fall came at 0.95 s; the stretch lasted to 1.2 s.
    for then in ("CongestionAvoidance", "SlowStart", None):
        with pytest.raises(Deviation) as e:
            css.judge_resume("s", STEP, [css.Stretch(450_000, 1_200_000, then)], ACKS, None, 2_000)
        assert e.value.kind == "css-kept-after-the-delay-fell"


def test_css_that_ran_out_of_rounds_before_the_samples_is_not_exercised():
    with pytest.raises(NotExercised):
        css.judge_resume("s", STEP, [css.Stretch(450_000, 820_000, "CongestionAvoidance")], ACKS, None, 2_000)


def test_css_begun_before_the_rise_or_over_before_the_fall_is_not_judged():
    with pytest.raises(NotExercised):
        css.judge_resume("s", STEP, [css.Stretch(300_000, 1_200_000, None)], ACKS, None, 2_000)
    with pytest.raises(NotExercised):
        css.judge_resume("s", STEP, [css.Stretch(450_000, 700_000, "SlowStart")], ACKS, None, 2_000)
