"""HyStart++'s conservative slow start as the property that judges its divisor sees
it: the stretches a log names, the capability only a stack that logs it declares, and
the schedules that give the round trip room to rise."""

from __future__ import annotations

from hypothesis import given, settings

from harness.observe import dialects
from harness.observe.events import CongestionState, Metrics, Trace
from harness.schedule import strategies
from properties.test_hystart import css_intervals


def _trace(events):
    return Trace("quiche", "server", events, "test")


def test_css_stretches_run_from_the_state_to_the_next_one_or_the_trace_end():
    trace = _trace([
        CongestionState(0.0, "SlowStart", raw="slow_start"),
        CongestionState(300_000.0, "SlowStart", raw="conservative_slow_start"),
        CongestionState(900_000.0, "SlowStart", raw="slow_start"),  # a spurious CSS ends (RFC 9406 §4.2)
        CongestionState(1_000_000.0, "SlowStart", raw="conservative_slow_start"),
        Metrics(1_500_000.0, congestion_window=50_000),
    ])
    assert css_intervals(trace) == [(300_000.0, 900_000.0), (1_000_000.0, 1_500_000.0)]
    assert css_intervals(_trace([CongestionState(0.0, "SlowStart", raw="slow_start")])) == []


def test_only_a_stack_that_names_css_declares_it():
    assert dialects.of_stack("quiche", True).logs("conservative_slow_start")
    for stack in ("aioquic", "quinn", "ngtcp2", "s2n-quic", "tquic", "picoquic", "quic-go"):
        assert not dialects.of_stack(stack, True).logs("conservative_slow_start"), stack


@settings(max_examples=20)
@given(strategies.deep_clean())
def test_deep_clean_links_have_a_deep_queue_and_no_impairment(schedule):
    (phase,) = schedule.phases
    assert not schedule.actions
    link = phase.s2c
    bdp = link.rate_bps / 8 * 2 * link.delay_us / 1e6
    assert link.queue_bytes >= 7.9 * bdp
    assert (link.loss, link.jitter_us, link.blackhole, link.ecn_threshold_bytes, link.trace) == (None,) * 5


def test_rounds_are_counted_by_the_senders_own_rtt_samples():
    from properties.test_hystart import rounds_between
    trace = _trace([
        Metrics(0.0, latest_rtt_us=50_000.0),
        Metrics(100_000.0, latest_rtt_us=100_000.0),  # the queue doubles the round trip
        Metrics(300_000.0, latest_rtt_us=100_000.0),
    ])
    # 100 ms at 50 ms, then 300 ms at 100 ms: 2 + 3 rounds.
    assert abs(rounds_between(trace, 0.0, 400_000.0) - 5.0) < 1e-9
    assert abs(rounds_between(trace, 50_000.0, 100_000.0) - 1.0) < 1e-9
    assert rounds_between(_trace([Metrics(0.0, congestion_window=1)]), 0.0, 1e6) is None
