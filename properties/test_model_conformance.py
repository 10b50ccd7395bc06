"""Every run is a behaviour of the TLA+ model of congestion control.

spec/CongestionControl.tla (RFC 9002 §6-7, Appendix B; RFC 9438 §4 for CUBIC) with
windows as relations: a reduction to β·cwnd ± one datagram, growth at most the bytes
acknowledged in slow start and one datagram per window in congestion avoidance, none
in a recovery period once it has reduced, one reduction per period. TLC validates
the sender's normalised trace (harness/model/validate.py); a mismatch names the
first event no step of the model explains.

The run also feeds model-guided generation: each example reports to Hypothesis how
many model transitions it reached that earlier examples had not (hypothesis.target),
and is recorded for `longlook coverage`.
"""

from __future__ import annotations

import os

from hypothesis import example, given, target as hypothesis_target
from hypothesis import strategies as st

from harness.model import coverage, tracefile, validate
from harness.schedule import TransferPlan, strategies
from harness.verdict import outcomes

PLAN = TransferPlan(sizes=(400_000,))
#: Set to 0 to turn model guidance off (bench/model_coverage_bench.py compares both).
GUIDANCE_ENV = "LONGLOOK_MODEL_GUIDANCE"
#: Loss, reordering and jitter, or a blackhole (which reaches PTO and persistent congestion).
SCHEDULES = st.one_of(strategies.combinations(), strategies.blackholes())


@example(schedule=strategies.CLEAN_LINK)
@given(schedule=SCHEDULES)
def test_run_is_a_behaviour_of_the_model(longlook, target, schedule):
    """RFC 9002 §6-7 as spec/CongestionControl.tla: TLC accepts the sender's trace,
    event by event (a partial trace as a prefix)."""
    if target.cc.family not in tracefile.FAMILIES:
        outcomes.not_applicable(f"{target.cc.family} has no window relation in the spec "
                                f"(only {', '.join(tracefile.FAMILIES)})")
    # What trace validation needs from any run (tracefile._check), as capabilities.
    for capability in ("congestion_window", "packet_lost", "ack_frames"):
        outcomes.require(target, capability)
    with longlook.run(target, schedule, PLAN) as obs:
        assert obs.result.ok, f"{target.id}: transfer failed: {obs.result.reason}"
        trace = obs.sender
        try:
            log = tracefile.from_trace(trace, target.cc.family)
        except tracefile.Unvalidatable as e:
            outcomes.not_exercised(f"trace validation impossible on this run: {e}")
        verdict = validate.validate_log(log, trace, keep=obs.out_dir / "model")
        coverage.record(longlook.artifacts / "model-coverage" / f"{target.id}.ndjson", target.id, verdict,
                        schedule.to_json())
        reached = set(coverage.transitions(verdict))
        if os.environ.get(GUIDANCE_ENV, "1") != "0":
            hypothesis_target(float(coverage.novelty(target.id, reached)), label="new model transitions")
        assert verdict.accepted, f"{target.id}: {verdict.describe()}"
