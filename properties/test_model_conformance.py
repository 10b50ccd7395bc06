"""Every run is a behaviour of the TLA+ model of congestion control.

spec/CongestionControl.tla (RFC 9002 §6-7, Appendix B; RFC 9438 §4 for CUBIC) with
windows as relations: a reduction to β·cwnd ± one datagram, growth at most the bytes
acknowledged in slow start and one datagram per window in congestion avoidance, none
in a recovery period once it has reduced, one reduction per period. TLC validates
the sender's normalised trace (harness/model/validate.py); every deviation names
the event no step of the model explains and the rule it breaks, and validation
goes on past it.

The model also drives the generation: half of the schedules are steered, an
earlier run's schedule with one impairment added where its trace shows the sender in
the state a transition this target has not reached yet starts from
(harness/model/steer.py); before any run, TLC's path to such a transition as link
impairments (harness/model/traps.py, harness/schedule/directed.py). Each example reports to
Hypothesis how many model transitions it reached that earlier examples had not
(hypothesis.target); every run is recorded for `longlook coverage`.
"""

from __future__ import annotations

import os
from dataclasses import replace

from hypothesis import example, given, target as hypothesis_target
from hypothesis import strategies as st

from harness.model import coverage, steer, tracefile, traps, validate
from harness.schedule import Action, TransferPlan, strategies
from harness.schedule.directed import directed, tail_datagram, to_schedule
from harness.schedule.strategies import QUIC, BaseLink
from harness.verdict import outcomes, profiles
from harness.verdict.deviation import deviation, raise_all

#: A 400 kB object, a pause, and a 100 kB one: the pause makes the sender application
#: limited (RFC 9002 §7.8) once its tail drains, and the second object ends it, so
#: every run passes through ApplicationLimited and out of it (harness/observe/appdata.py).
PLAN = TransferPlan(sizes=(400_000, 100_000), testcase="appidle", think_ms=40)
#: Set to 0 to turn model guidance off (bench/model_coverage_bench.py compares both).
GUIDANCE_ENV = "LONGLOOK_MODEL_GUIDANCE"
#: Two losses, early and later: every run of the case passes through slow start, a
#: recovery period and congestion avoidance whatever Hypothesis draws (the drawn
#: schedules may lose nothing, and a finding must not depend on their luck).
EARLY_LOSSES = BaseLink().schedule(seed=0, actions=[Action("s2c", 60, "drop", flow=QUIC),
                                                    Action("s2c", 250, "drop", flow=QUIC)])
#: TLC's path to a third PTO expiry in a row, as a schedule: the data direction dark
#: early in the transfer for a round trip and 5 PTO periods (past the second expiry,
#: before the third: harness/schedule/directed.py), so every run of the case passes through
#: TailLossProbe, RetransmissionTimeout and (on most stacks) persistent congestion.
#: (A blackhole from 600 ms, as the persistent-congestion properties use for their
#: transfers of a few MB, began after this 400 kB transfer had ended.)
THREE_PTOS = to_schedule(traps.load()[("RetransmissionTimeout", "OnPtoExpired", "RetransmissionTimeout")],
                         BaseLink(), seed=0)
#: TLC's path to growth while one PTO has expired: the data direction dark for one PTO
#: period and a half after a round trip, so the probe is answered. The probe's ACK
#: reveals the packets lost in the dark, and the sender declares them, cuts its window
#: and grows it while still in TailLossProbe (RFC 9002 A.7 resets pto_count only after
#: that), then leaves it for Recovery.
PROBE_ANSWERED = to_schedule(traps.load()[("TailLossProbe", "GrowWindow", "TailLossProbe")], BaseLink(), seed=0)
#: TLC's path to a cut for an ECN-CE echo, as marks: on a sender that marks ECT the
#: trace takes OnEcnCe; on one that does not, the run is a clean one.
ECN_CUT = to_schedule(traps.load()[("SlowStart", "OnEcnCe", "Recovery")], BaseLink(), seed=0)
#: Set to 0 to draw free schedules only, to "open" for free and directed ones without
#: steering, to "only" for steered and directed ones only (bench/model_coverage_bench.py
#: compares them).
DIRECTED_ENV = "LONGLOOK_DIRECTED"
#: Loss, reordering and jitter, or a blackhole (which reaches PTO and persistent
#: congestion); and the model's: steered from an earlier run (harness/model/steer.py),
#: or before there is one, TLC's path to a model transition this target has not
#: reached yet as link impairments (harness/schedule/directed.py).
FREE = [strategies.combinations(), strategies.blackholes()]
_DIRECTED = os.environ.get(DIRECTED_ENV, "1")
_OPEN_LOOP = directed(traps.load(), coverage.pending, tail_datagram(PLAN.sizes[0]))
_MODEL = None if _DIRECTED == "0" else _OPEN_LOOP if _DIRECTED == "open" else steer.steered(
    _OPEN_LOOP, coverage.pending, coverage.current)


@st.composite
def _schedules(draw):
    """Half of the draws are the model's, half free: the free ones reach few model
    transitions past the first examples (BENCHMARKS.md). (A one_of of the three drew
    the model's in 2 to 6 of 40 examples, measured; why, not established.)"""
    k = draw(st.integers(min_value=0, max_value=3))
    if _MODEL is not None and (k < 2 or _DIRECTED == "only"):
        return draw(_MODEL)
    return draw(FREE[k % 2])


SCHEDULES = _schedules()


#: Window caps in datagrams (0: none), for a sender whose endpoint takes one (caps.json
#: honours.max_window): at its cap the model's state is CongestionAvoidanceMaxed. On
#: the base link (a BDP of about 80 datagrams) these hold the window below the path's
#: share, so a 400 kB transfer spends most of its round trips at the cap.
CAPS_DATAGRAMS = (0, 16, 24)
#: The bytes of a cap's datagram: aioquic's largest QUIC packet on the testbed's links.
CAP_DATAGRAM_BYTES = 1252


#: The caps drawn; a replay's the one its saved plan ran with (a steered schedule's
#: cap is its baseline's, whatever was drawn: steer.cap_of).
CAPS = strategies.replayed_plan_value("window_cap", st.sampled_from(CAPS_DATAGRAMS),
                                      lambda window_cap: window_cap // CAP_DATAGRAM_BYTES)
#: Under the ci profile, generated examples while they take under BUDGET_S (at least
#: the profile's 3): each example may reach transitions the others did not, and a
#: sans-IO target in virtual time runs one in about a second (docs/model.md, "Coverage").
BUDGET_EXAMPLES, BUDGET_S = 40, 30


@example(schedule=strategies.CLEAN_LINK, cap=0)
@example(schedule=EARLY_LOSSES, cap=0)
@example(schedule=THREE_PTOS, cap=0)
@example(schedule=PROBE_ANSWERED, cap=0)
@example(schedule=ECN_CUT, cap=0)
@example(schedule=EARLY_LOSSES, cap=16)
@profiles.budgeted(BUDGET_EXAMPLES, BUDGET_S)
@given(schedule=SCHEDULES, cap=CAPS)
def test_run_is_a_behaviour_of_the_model(longlook, target, schedule, cap):
    """RFC 9002 §6-7 as spec/CongestionControl.tla: TLC accepts the sender's trace,
    event by event (a partial trace as a prefix). A run with a window cap gives it to
    the model as MaxWindow (on senders that take one; elsewhere `cap` is ignored)."""
    if target.cc.family not in tracefile.FAMILIES:
        outcomes.not_applicable(f"{target.cc.family} has no window relation in the spec "
                                f"(only {', '.join(tracefile.FAMILIES)})")
    # What trace validation needs from any run (tracefile._check): a logged window.
    # ACK frames and declared losses a stack's log lacks come from the capture.
    outcomes.require(target, "congestion_window")
    plan = PLAN
    cap = steer.cap_of(schedule, cap)
    steered = steer.ran(schedule)
    if cap and target.stack.honours.get("max_window"):
        plan = replace(PLAN, window_cap=cap * CAP_DATAGRAM_BYTES)
    with longlook.run(target, schedule, plan) as obs:
        obs.completed()
        trace = obs.sender_with_wire
        try:
            log = tracefile.from_trace(trace, target.cc.family, _ce_acks(obs, schedule), plan.window_cap or None,
                                       _app_marks(obs))
        except tracefile.Unvalidatable as e:
            outcomes.not_exercised(f"trace validation impossible on this run: {e}")
        verdict = validate.validate_log(log, trace, keep=obs.out_dir / "model")
        coverage.record(longlook.artifacts / "model-coverage" / f"{target.id}.ndjson", target.id, verdict,
                        schedule.to_json(), ect=_ect(obs, schedule),
                        takes_cap=bool(target.stack.honours.get("max_window")), steered=steered)
        # Every run may be steered from later on (harness/model/steer.py).
        steer.keep(target.id, steer.baseline(schedule, cap if plan.window_cap else 0, trace, verdict.steps,
                                             obs.transfer_records("s2c"), obs.transfer_records("c2s")))
        # What this target has reached so far, for the model's schedules (pending())
        # whether or not it also guides Hypothesis.
        new = coverage.novelty(target.id, set(coverage.transitions(verdict)))
        if os.environ.get(GUIDANCE_ENV, "1") != "0":
            hypothesis_target(float(new), label="new model transitions")
        raise_all(deviations(verdict, target.id))


def _ce_acks(obs, schedule) -> set[tuple[str, int]]:
    """The largest acknowledged packet of each ACK that raised the CE count for a mark
    of the link's (harness/verdict/ecn.py): the trace's OnEcnCe steps. Empty where the
    link marked nothing (the sender marks no datagram ECT, or no mark was drawn) or
    the capture cannot be decrypted."""
    from harness.run import Inconclusive
    from harness.verdict import ecn

    records = obs.transfer_records("s2c")
    if not ecn.ce_marked(records):
        return set()
    try:
        echoes = ecn.ce_echoes(obs.wire)
    except Inconclusive:
        return set()
    ack_delay = min(p.c2s.delay_us or 0 for p in schedule.phases)
    return {("application", e.largest) for e in ecn.link_echoes(echoes, ecn.echo_times(records, ack_delay))}


def _ect(obs, schedule) -> bool | None:
    """Whether the sender's datagrams are ECT, by the link's own hand: of the delivered
    datagrams the schedule asked it to CE-mark, did it mark any (it marks only ECT
    ones)? None where it asked for none, or every one asked for was dropped or never sent."""
    marks = [a for a in schedule.actions if a.action == "ce" and a.dir == "s2c"]
    if not marks:
        return None
    # An action's index counts the packets of its flow where it names one, else all.
    by_flow = {a.index for a in marks if a.flow is not None}
    by_all = {a.index for a in marks if a.flow is None}
    hit = [r for r in obs.transfer_records("s2c")
           if (r.fidx in by_flow or r.idx in by_all) and r.fate == "delivered"]
    return any("ce" in r.marks for r in hit) if hit else None


def _app_marks(obs):
    """Where the sender's application ran dry and resumed, from its capture's STREAM
    frames (harness/observe/appdata.py); none where the capture cannot be decrypted
    (the trace then has no app-limited periods, and the model none to judge)."""
    from harness.observe.appdata import AppMarks, app_marks
    from harness.run import Inconclusive

    try:
        return app_marks(obs.wire)
    except Inconclusive:
        return AppMarks()


def deviations(verdict, case: str) -> list:
    """One deviation per distinct kind (the rule broken) with the lines it was seen at:
    a recorded finding absorbs the run only if it matches every kind."""
    kinds: dict[str, list] = {}
    for m in verdict.mismatches:
        kinds.setdefault(m.kind, []).append(m)
    return [deviation(kind, f"{case}: {kind} at line(s) {_lines(verdict.lines(kind))}; {verdict.describe()}",
                      **ms[0].measured)
            for kind, ms in kinds.items()]


def _lines(lines: list[int], shown: int = 12) -> str:
    more = f" and {len(lines) - shown} more" if len(lines) > shown else ""
    return ", ".join(map(str, lines[:shown])) + more
