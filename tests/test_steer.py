"""Steered schedules (harness/model/steer.py): a baseline run's model states in link
time, and the impairment each kind of transition maps to, placed from them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.model import steer
from harness.model.validate import Step
from harness.observe.events import Metrics, PacketAcked, PacketLost, PacketSent, Trace
from harness.schedule.links import QUIC, BaseLink
from harness.schedule.types import Action

RTT = 40_000.0
PTO = 100_000.0


def _one(b, t) -> list[Action]:
    """The single actions `t` maps to (each impairment one action)."""
    out = []
    for added in steer.impairments(b, t):
        (a,) = added
        out.append(a)
    return out


def _baseline(spans, steps=(), s2c_every=1_000.0, n=600, schedule=None, cap=0) -> steer.Baseline:
    """A hand-made baseline: a datagram each way every `s2c_every` µs from 0."""
    times = tuple(i * s2c_every for i in range(n))
    return steer.Baseline(schedule or BaseLink().schedule(seed=0), cap,
                          tuple(steer.Span(*s) for s in spans), tuple(steps), times, times, RTT, PTO)


SPANS = [("SlowStart", 0, 100_000), ("Recovery", 100_000, 150_000), ("CongestionAvoidance", 150_000, 400_000),
         ("ApplicationLimited", 400_000, 450_000)]
STEPS = [(0, "Init", "OnPacketSent", "SlowStart"), (50_000, "SlowStart", "OnPacketsAcked", "SlowStart"),
         (100_000, "SlowStart", "OnPacketsLost", "Recovery"),
         (150_000, "Recovery", "OnPacketsAcked", "CongestionAvoidance"),
         (200_000, "CongestionAvoidance", "GrowWindow", "CongestionAvoidance"),
         (400_000, "CongestionAvoidance", "SetAppLimited", "ApplicationLimited")]


def test_a_pto_from_a_state_darkens_either_direction_from_a_moment_in_it():
    b = _baseline(SPANS, STEPS)
    acts = _one(b, ("CongestionAvoidance", "OnPtoExpired", "TailLossProbe"))
    # Three moments of the one span (its start, midway, late), each way, from the first
    # datagram after each (the one at the span's start led into it).
    assert [(a.dir, a.index) for a in acts] == [("c2s", 151), ("s2c", 151), ("c2s", 276), ("s2c", 276),
                                               ("c2s", 376), ("s2c", 376)]
    # One expiry and not the next: two periods; the data's direction a round trip more.
    assert {a.duration_us for a in acts if a.dir == "c2s"} == {round(2 * PTO)}
    assert {a.duration_us for a in acts if a.dir == "s2c"} == {round(2 * PTO + RTT)}
    assert all(a.action == "outage" and a.flow == QUIC for a in acts)


def test_no_moment_is_taken_before_the_first_acknowledgement():
    b = _baseline(SPANS, STEPS)
    assert steer._moments(b, "SlowStart") == [50_000, 75_000, 95_000]  # the handshake's is not the transfer's


def test_a_second_expiry_keeps_the_dark_past_it():
    b = _baseline(SPANS, STEPS)
    (first, *_) = _one(b, ("TailLossProbe", "OnPtoExpired", "RetransmissionTimeout"))
    assert first.duration_us == round(5 * PTO)  # halfway between the 2nd (3 P) and the 3rd (7 P)


def test_the_end_of_a_probe_state_is_aimed_at_the_state_it_returns_to():
    b = _baseline(SPANS, STEPS)
    acts = _one(b, ("TailLossProbe", "OnAckProcessed", "ApplicationLimited"))
    assert [(a.dir, a.index) for a in acts] == [("c2s", 401), ("c2s", 426), ("c2s", 446)]
    acts = _one(b, ("RetransmissionTimeout", "OnAckProcessed", "SlowStart"))
    assert {a.duration_us for a in acts} == {round(5 * PTO)}


def test_a_loss_is_dropped_where_the_sender_finds_it_in_the_state():
    b = _baseline(SPANS, STEPS)
    acts = _one(b, ("ApplicationLimited", "OnPacketsLost", "Recovery"))
    drops = [a for a in acts if a.action == "drop"]
    # Found when its third successor's ACK comes back: three datagrams before the last
    # one sent a round trip before the moment.
    assert drops[0] == Action("s2c", 400 - 40 - steer.PACKET_THRESHOLD, "drop", flow=QUIC)
    # And one of the last two sent before a recovery period began, found after it.
    assert Action("s2c", 99, "drop", flow=QUIC) in drops and Action("s2c", 98, "drop", flow=QUIC) in drops


def test_a_senders_own_step_from_recovery_or_a_probe_state_is_led_into_that_state_first():
    b = _baseline(SPANS, STEPS)
    (drop,) = _one(b, ("Recovery", "GrowWindow", "Recovery"))
    assert drop.action == "drop" and drop.index == 200 - 20 - 40 - steer.PACKET_THRESHOLD
    (dark,) = _one(b, ("TailLossProbe", "SetAppLimited", "TailLossProbe"))
    # The first expiry a fifth of a period before the baseline's step at 400 ms.
    assert (dark.dir, dark.index, dark.duration_us) == ("c2s", 400 - 120 + 1, round(2 * PTO))


def test_a_ce_mark_is_placed_where_its_echo_comes_in_the_state_and_on_a_probe():
    b = _baseline(SPANS, STEPS)
    acts = _one(b, ("ApplicationLimited", "OnEcnCe", "Recovery"))
    assert acts[0] == Action("s2c", 400 - 40, "ce", flow=QUIC)  # its ACK back a round trip later
    (dark, *marks), *_ = steer.impairments(b, ("TailLossProbe", "OnEcnCe", "TailLossProbe"))
    # From slow start's first moment after the first ACK (at 50 ms).
    assert (dark.dir, dark.action, dark.index) == ("c2s", "outage", 51)
    assert [m.index for m in marks] == list(range(51, 51 + steer.PROBE_MARKS)) and {m.action for m in marks} == {"ce"}


def test_what_the_mapping_cannot_reach_it_does_not_try():
    b = _baseline(SPANS, STEPS)
    assert _one(b, ("CongestionAvoidance", "OnPersistentCongestion", "SlowStart")) == []
    assert _one(b, ("SlowStart", "ReduceWindow", "CongestionAvoidance")) == []
    assert _one(b, ("ApplicationLimited", "GrowWindow", "ApplicationLimited")) == []


def test_candidates_add_one_action_to_the_baselines_schedule_with_its_cap():
    held = Action("s2c", 151, "outage", flow=QUIC, duration_us=1000)
    b = _baseline(SPANS, STEPS, schedule=BaseLink().schedule(seed=7, actions=[held]), cap=16)
    cands = steer.candidates(b, ("CongestionAvoidance", "OnPtoExpired", "TailLossProbe"))
    assert len(cands) == 5  # the s2c outage at 151 would sit on the one already there
    for s, cap in cands:
        assert cap == 16 and s.seed == 7 and s.phases == b.schedule.phases
        assert held in s.actions and len(s.actions) == 2


def test_the_pool_offers_the_transitions_tried_least_and_never_a_schedule_run_before(monkeypatch):
    for name, empty in (("_baselines", {}), ("_caps", {}), ("_aims", {}), ("_ran", set()), ("_tries", Counter())):
        monkeypatch.setattr(steer, name, empty)
    steer.keep("t", _baseline(SPANS, STEPS, cap=24))
    cong, reco = ("CongestionAvoidance", "OnPtoExpired", "TailLossProbe"), ("Recovery", "OnPtoExpired", "TailLossProbe")
    pool = steer.pool("t", {cong, reco})
    assert [[a.index for a in s.actions] for s, _ in pool] == [[151], [101]]  # one of each, its first candidate
    s, cap = pool[0]
    assert steer.cap_of(s, 0) == 24 and steer.ran(s) == cong
    # The other transition has been tried less: only its candidate is offered now.
    assert [[a.index for a in s.actions] for s, _ in steer.pool("t", {cong, reco})] == [[101]]
    steer.ran(steer.pool("t", {cong, reco})[0][0])
    # Both tried once: each one's next candidate, never the schedule that ran.
    again = steer.pool("t", {cong, reco})
    assert len(again) == 2 and s not in [c for c, _ in again]
    for _ in range(steer.TRIES_PER_TRANSITION):
        for c, _ in steer.pool("t", {cong}):
            steer.ran(c)
    assert steer.pool("t", {cong}) == []  # given up for the session
    assert steer.pool("other", {cong}) == [] and steer.pool("t", set()) == []
    # A transition the added impairment itself brings about goes before one that needs
    # the sender's own step in the state it was led into.
    grow = ("Recovery", "GrowWindow", "Recovery")
    steer.keep("u", _baseline(SPANS, STEPS))
    assert [steer.aim_of(s) for s, _ in steer.pool("u", {reco, grow})] == [reco]
    assert steer.ran(BaseLink().schedule(seed=1)) is None


def test_a_baseline_reads_states_in_link_time_and_when_the_peers_datagrams_reached_the_sender():
    ev = [PacketSent(t_us=1_000.0 * i, pn=i, size=1200, ack_eliciting=True) for i in range(10)]
    ev += [PacketAcked(t_us=50_000.0, pn=0), PacketLost(t_us=60_000.0, pn=1),
           Metrics(t_us=60_000.0, smoothed_rtt_us=40_000.0, rtt_variance_us=5_000.0)]
    trace = Trace("aioquic", "server", ev, "x")
    steps = [Step(1, "Init", "OnPacketSent", "SlowStart"), Step(11, "SlowStart", "OnPacketsAcked", "SlowStart"),
             Step(12, "SlowStart", "OnPacketsLost", "Recovery")]
    # The link's clock runs 500 µs ahead of the trace's.
    s2c = [SimpleNamespace(fidx=i, arr_us=1_000.0 * i + 500) for i in range(10)]
    c2s = [SimpleNamespace(fidx=0, arr_us=30_000.0, dep_us=50_500.0), SimpleNamespace(fidx=1, arr_us=31_000.0, dep_us=None),
           SimpleNamespace(fidx=2, arr_us=32_000.0, dep_us=52_000.0)]
    b = steer.baseline(BaseLink().schedule(seed=0), 0, trace, steps, s2c, c2s)
    assert [(s.state, s.t0) for s in b.spans] == [("SlowStart", 500.0), ("Recovery", 60_500.0)]
    assert b.spans[0].t1 == 60_500.0
    # A dropped datagram would have reached the sender a one-way delay after it left.
    assert b.c2s == (50_500.0, 51_000.0, 52_000.0)
    assert b.pto_us == pytest.approx(40_000 + 4 * 5_000 + steer.MAX_ACK_DELAY_US)
    # The period at a moment is the last logged estimate's; before any, the run's median.
    assert b.pto_at(70_000) == pytest.approx(85_000) and b.pto_at(0) == b.pto_us


def test_a_baseline_without_sends_or_steps_is_none():
    trace = Trace("aioquic", "server", [], "x")
    assert steer.baseline(BaseLink().schedule(seed=0), 0, trace, [], [], []) is None


@pytest.mark.slow
def test_a_run_steered_from_its_baseline_takes_the_transition_and_replays(tmp_path):
    """On aioquic in virtual time: the explicit example with two early losses as the
    baseline, a PTO expiry in Recovery (which no free schedule of the ci profile had
    reached) steered from it, reached; and its saved example replays with
    `longlook replay` to the same transition."""
    import json
    import subprocess
    import sys

    from harness.model import coverage, tracefile, validate
    from harness.run import Example, Target, run_example
    from harness.verdict.runner import Observation
    from properties.test_model_conformance import EARLY_LOSSES, PLAN, _app_marks

    nodeid = "properties/test_model_conformance.py::test_run_is_a_behaviour_of_the_model[aioquic-newreno]"
    target = Target.parse("aioquic", "newreno", None, "download")

    def run(schedule, out):
        out.mkdir()
        example = Example(nodeid, "aioquic", "newreno", schedule, PLAN, 60.0, "virtual")
        obs = Observation(example, target, run_example(example, target, out), out)
        trace = obs.sender_with_wire
        verdict = validate.validate_log(tracefile.from_trace(trace, "newreno", set(), None, _app_marks(obs)), trace)
        return obs, trace, verdict, example

    obs, trace, verdict, _ = run(EARLY_LOSSES, tmp_path / "baseline")
    wanted = ("Recovery", "OnPtoExpired", "TailLossProbe")
    assert wanted not in coverage.transitions(verdict)
    b = steer.baseline(EARLY_LOSSES, 0, trace, verdict.steps, obs.transfer_records("s2c"), obs.transfer_records("c2s"))
    assert {"SlowStart", "Recovery", "CongestionAvoidance"} <= {s.state for s in b.spans}
    (schedule, cap), *_ = steer.candidates(b, wanted)
    _, _, steered, example = run(schedule, tmp_path / "steered")
    assert coverage.transitions(steered)[wanted] >= 1, sorted(coverage.transitions(steered))
    (tmp_path / "steered" / "example.json").write_text(json.dumps(example.to_json() | {"run": {"backend": "local"}}))
    p = subprocess.run([sys.executable, "-m", "harness.cli", "replay", str(tmp_path / "steered"), "--mode", "virtual"],
                       cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    reached = coverage.load([tmp_path / "steered" / "replay" / "model-coverage"])["aioquic-newreno"].reached
    assert reached[wanted] >= 1, sorted(reached)


def test_a_draw_gives_the_same_steered_schedule_again(monkeypatch):
    """Hypothesis replays a failing example's draws to shrink and report it: the same
    draw must give the same schedule, though the pool has moved on since it ran."""
    from hypothesis import strategies as st

    for name, empty in (("_baselines", {}), ("_caps", {}), ("_aims", {}), ("_ran", set()), ("_tries", Counter()),
                        ("_by_draw", {})):
        monkeypatch.setattr(steer, name, empty)
    steer.keep("t", _baseline(SPANS, STEPS))
    pending = {("CongestionAvoidance", "OnPtoExpired", "TailLossProbe"), ("Recovery", "OnPtoExpired", "TailLossProbe")}
    strategy = steer.steered(st.nothing(), lambda: pending, lambda: "t")
    first = strategy.do_draw(_data([7]))
    steer.ran(first)
    assert strategy.do_draw(_data([7])) == first
    assert strategy.do_draw(_data([8])) != first  # another draw, the pool's next


def _data(choices):
    from hypothesis.internal.conjecture.data import ConjectureData

    return ConjectureData.for_choices(choices)
