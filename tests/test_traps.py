"""Directed generation (issue 26 part 2): TLC's paths to model transitions (trap
properties, spec/MCTrap.tla) and their mapping to schedules; one path run on
aioquic in virtual time reaches its transition, replayed with `longlook replay`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.model import coverage, traps
from harness.schedule.directed import FIRST_DATA, PERSISTENT_PTOS, datagrams, pto_ms, to_schedule
from harness.schedule.strategies import BaseLink

TLP_TO_RTO = ("TailLossProbe", "OnPtoExpired", "RetransmissionTimeout")
REPO = Path(__file__).resolve().parent.parent


def test_the_cached_paths_are_those_of_this_model():
    """spec/traps.json must follow the model: `longlook traps --refresh` after a change."""
    paths = traps.load()  # raises StaleTraps when the model files changed
    observable = {t for t in coverage.model_transitions() if coverage.observable(t)}
    assert observable <= set(paths), sorted(observable - set(paths))[:5]
    for t, steps in paths.items():
        assert steps[0].before == "Init" and (steps[-1].before, steps[-1].action, steps[-1].after) == t
        assert all(a.after == b.before for a, b in zip(steps, steps[1:])), t  # one chain of states
        if t in observable:  # only actions a schedule can bring about on the way
            # (an application's pause is the plan's: only on the way to its own transitions)
            if not set(t) & {*coverage.PLAN_ONLY_STATES, *coverage.PLAN_ONLY_ACTIONS}:
                assert not {s.action for s in steps[:-1]} & set(coverage.PLAN_ONLY_ACTIONS), (t, steps)
            # nor through a capped state on the way to a transition outside them
            if not set(t) & set(coverage.CAP_ONLY_STATES):
                assert not {s.after for s in steps[:-1]} & set(coverage.CAP_ONLY_STATES), (t, steps)
            # and, on the way to a transition that is not an ECN step, no ECN step: that
            # way is the same on every stack, whether its sender marks ECT or not
            if t[1] not in coverage.ECT_ONLY_ACTIONS:
                assert not {s.action for s in steps[:-1]} & set(coverage.ECT_ONLY_ACTIONS), (t, steps)


def test_tlc_finds_a_shortest_path_to_a_transition():
    steps = traps.path_to(TLP_TO_RTO)
    assert [s.action for s in steps] == ["OnPacketSent", "OnPtoExpired", "OnPtoExpired"]
    assert steps == traps.load()[TLP_TO_RTO]


def test_a_stale_cache_is_refused_with_the_fix(tmp_path):
    data = json.loads(traps.CACHE.read_text())
    data["model_version"] = "0" * 16
    (tmp_path / "traps.json").write_text(json.dumps(data))
    with pytest.raises(traps.StaleTraps, match="longlook traps --refresh"):
        traps.load(tmp_path / "traps.json")


def test_paths_map_to_link_actions():
    base = BaseLink()
    two_ptos = to_schedule(traps.load()[TLP_TO_RTO], base, seed=1)
    dark = [a for a in two_ptos.actions if a.action == "outage"]
    assert len(dark) == 1 and len(two_ptos.actions) == 1 and len(two_ptos.phases) == 1
    # From the packet in flight at the first expiry: a round trip (the sender's last
    # send into the dark), then past the first expiry and not the second: the second
    # one's probe is answered.
    assert dark[0].index == FIRST_DATA
    assert abs(dark[0].duration_us - (base.rtt_us + 2.0 * pto_ms(base) * 1000)) <= 1
    lost = ("SlowStart", "OnPacketsLost", "Recovery")
    drops = to_schedule(traps.load()[lost], base, seed=1, stride=2).actions
    assert drops and all(a.action == "drop" and a.index >= FIRST_DATA and (a.index - FIRST_DATA) % 2 == 0
                         for a in drops)
    pc = ("Recovery", "OnPersistentCongestion", "SlowStart")
    s = to_schedule(traps.load()[pc], base, seed=1)
    on = [a for a in s.actions if a.action == "outage"][0]
    assert on.duration_us >= PERSISTENT_PTOS * pto_ms(base) * 1000


def test_an_outage_starts_after_what_the_path_had_acknowledged():
    """The path to a PTO in congestion avoidance has its recovery period end with an
    acknowledgement first: the dark must not take that packet, or the sender is still
    in recovery when its timer fires (every such path had missed when the dark began
    at an estimated time)."""
    path = traps.load()[("CongestionAvoidance", "OnPtoExpired", "TailLossProbe")]
    real = datagrams(path, BaseLink(), stride=3)
    acked = [s.pn for s in path if s.action == "OnPacketsAcked"]
    s = to_schedule(path, BaseLink(), seed=0)
    (outage,) = [a for a in s.actions if a.action == "outage"]
    assert outage.index == max(real[q] for q in acked) + 1


@pytest.mark.slow
def test_the_tlp_to_rto_path_reaches_that_transition_on_aioquic(tmp_path):
    """The issue's check: a trap path as a schedule, run on a real stack (aioquic, in
    virtual time) through `longlook replay`, takes the transition the path ends in."""
    schedule = to_schedule(traps.load()[TLP_TO_RTO], BaseLink(), seed=0)
    example = {"nodeid": "properties/test_model_conformance.py::test_run_is_a_behaviour_of_the_model"
                         "[aioquic-newreno]",
               "stack": "aioquic", "cc": "newreno", "schedule": schedule.to_json(),
               "plan": {"sizes": [400000], "testcase": "multiplexing", "think_ms": 0, "seed": 0, "tcp_flows": 0,
                        "tcp_cc": "cubic", "quic_flows": 1},
               "timeout_s": 60.0, "mode": "virtual", "run": {"backend": "local"}}
    (tmp_path / "example.json").write_text(json.dumps(example))
    p = subprocess.run([sys.executable, "-m", "harness.cli", "replay", str(tmp_path), "--mode", "virtual"],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    reached = coverage.load([tmp_path / "replay" / "model-coverage"])["aioquic-newreno"].reached
    assert reached[TLP_TO_RTO] >= 1, sorted(reached)


def test_a_pto_then_persistent_congestion_keep_the_dark_long_enough():
    """A path with PTOs and then persistent congestion before any acknowledgement
    asks for two outages; the link keeps the direction dark until the later end of
    the two (tests/emulator), and the second lasts the persistent-congestion span."""
    steps = [traps.Step("Init", "OnPacketSent", "SlowStart", 0), traps.Step("SlowStart", "OnPacketSent", "SlowStart", 1),
             traps.Step("SlowStart", "OnPtoExpired", "TailLossProbe", -1),
             traps.Step("TailLossProbe", "OnPacketsAcked", "TailLossProbe", 1),
             traps.Step("TailLossProbe", "OnAckProcessed", "SlowStart", -1),
             traps.Step("SlowStart", "OnPacketsLost", "Recovery", 0),
             traps.Step("Recovery", "OnPersistentCongestion", "SlowStart", -1)]
    s = to_schedule(steps, BaseLink(), seed=0)
    dark = [a for a in s.actions if a.action == "outage"]
    assert len(s.phases) == 1 and len(dark) == 2 and dark[0].index < dark[1].index
    assert dark[1].duration_us >= PERSISTENT_PTOS * pto_ms(BaseLink()) * 1000


def test_an_applications_pause_maps_only_where_the_plans_tail_is_known():
    """The steps an application's pause brings about are the plan's: a path through
    one maps to a schedule only given the datagram where the plan's first object ends."""
    from harness.schedule.directed import UNMAPPED

    assert UNMAPPED == frozenset(coverage.PLAN_ONLY_ACTIONS)
    path = traps.load()[("ApplicationLimited", "OnPtoExpired", "TailLossProbe")]
    with pytest.raises(ValueError, match="tail"):
        to_schedule(path, BaseLink(), seed=0)


def test_a_path_through_a_pause_happens_at_the_first_objects_tail():
    """The last packet a path sends before its application runs dry is the datagram
    carrying the first object's last byte; one dropped before it moves it by one (the
    lost data is sent again first). A PTO once the application is dry gets no extra
    round trip of sending into the dark: the timer runs from that last datagram."""
    from harness.schedule.directed import at_the_tail, tail_datagram

    tail = tail_datagram(400_000)
    assert 325 <= tail <= 340
    pto = traps.load()[("ApplicationLimited", "OnPtoExpired", "TailLossProbe")]
    s = to_schedule(pto, BaseLink(), seed=0, tail=tail)
    (outage,) = s.actions
    assert outage.action == "outage" and outage.index == tail
    assert abs(outage.duration_us - 0.5 * pto_ms(BaseLink()) * 1000) <= 1
    lost = traps.load()[("Recovery", "SetAppLimited", "Recovery")]
    real = at_the_tail(lost, BaseLink(), 3, tail)
    dry = next(i for i, st in enumerate(lost) if st.action == "SetAppLimited")
    last = [st.pn for st in lost[:dry] if st.action == "OnPacketSent"][-1]
    drops_before = [st.pn for st in lost if st.action == "OnPacketsLost" and real[st.pn] < real[last]]
    assert real[last] == tail + len(drops_before) and drops_before


def test_packets_sent_after_an_ack_map_to_datagrams_a_round_trip_later():
    """The model's next packets after an ACK follow at once; a real sender's come a round
    trip after the acknowledged packet left. A loss among the datagrams in between would
    fall in the recovery period that ACK began, which is no new congestion event."""
    from harness.schedule.directed import index_at, sent_at_ms

    base = BaseLink()
    steps = [traps.Step("Init", "OnPacketSent", "SlowStart", 0), traps.Step("SlowStart", "OnPacketSent", "SlowStart", 1),
             traps.Step("SlowStart", "OnPacketsAcked", "SlowStart", 1),
             traps.Step("SlowStart", "OnPacketsLost", "Recovery", 0),
             traps.Step("Recovery", "OnPacketSent", "Recovery", 2), traps.Step("Recovery", "OnPacketSent", "Recovery", 3)]
    real = datagrams(steps, base, stride=3)
    assert real[0] == FIRST_DATA and real[1] == FIRST_DATA + 3
    rtt_ms = base.rtt_us / 1000
    assert sent_at_ms(base, real[2]) >= sent_at_ms(base, real[1]) + rtt_ms - 1e-6 and real[3] == real[2] + 3
    assert [a.index for a in to_schedule(steps, base, seed=0).actions] == [real[0]]
    # index_at inverts sent_at_ms (to the datagram, rounding up).
    for i in (1, 10, 55, 300):
        assert index_at(base, sent_at_ms(base, i)) in (i, i + 1)


def test_paths_leave_slow_start_by_a_loss_where_one_can():
    """A delay-based slow-start exit and persistent congestion are avoided on the way to a
    transition that has a path without them: only some senders exit slow start so, and a
    collapse costs a long blackhole after which a real sender slow-starts from scratch."""
    paths = traps.load()
    through = [t for t, p in paths.items() if p and any(s.action in traps.SENDER_CHOICE_ACTIONS for s in p[:-1])]
    # Only where the bounded model has no other way (reaching ssthresh by growth needs
    # an ssthresh a collapse or an exit set): a few paths of the 107.
    assert len(through) <= len(paths) // 20, through
    ca_loss = [s.action for s in paths[("CongestionAvoidance", "OnPacketsLost", "Recovery")]]
    assert "OnSlowStartExit" not in ca_loss and "OnPersistentCongestion" not in ca_loss
    assert "OnSlowStartExit" in traps._config(("SlowStart", "OnPacketsLost", "Recovery"))
    assert "OnSlowStartExit" not in traps._config(("SlowStart", "OnPacketsLost", "Recovery"), choices=True)
    # The transition itself may be one of them.
    assert '"OnSlowStartExit"' not in traps._config(("SlowStart", "OnSlowStartExit", "CongestionAvoidance")).split(
        "TrapAvoid =")[1].split("\n")[0]
