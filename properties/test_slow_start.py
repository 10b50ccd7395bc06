"""Slow start ends on a congestion signal.

RFC 9002 §7.3.1: a sender in slow start leaves it when a packet is declared lost or
an ECN-CE count rises; RFC 9406 (HyStart++) lets it leave earlier when the RTT rises
by at least max(4 ms, min(16 ms, minRTT/8)). A sender that leaves slow start with
none of these in the ground truth (nothing dropped or reordered, nothing CE-marked,
no queue building at the bottleneck) stops growing for no reason the network gave,
and under-uses the path for many round trips (Kakhki et al. §4.1 found Chromium's
window pinned at a cap instead).

The exit is the first change from SlowStart to another base state (as logged, or
inferred where the stack logs no states); the evidence is looked for in the last
EVIDENCE_RTTS round trips before it.
"""

from __future__ import annotations

from hypothesis import example, given

from harness.schedule import TransferPlan, strategies
from harness.verdict import analysis, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(2_000_000,))
#: How far back a signal may lie: a loss is declared up to about two RTTs after the
#: datagram was dropped (time threshold, then the ACK's way back).
EVIDENCE_RTTS = 3
#: RFC 9406's smallest RTT increase that ends slow start, µs.
MIN_RTT_INCREASE_US = 4_000
EXITS = {"CongestionAvoidance", "CongestionAvoidanceMaxed", "Recovery"}


@example(schedule=strategies.CLEAN_LINK)
@given(schedule=strategies.loss_only())
def test_slow_start_ends_on_a_congestion_signal(longlook, target, schedule):
    """The first exit from slow start follows a drop, a reordering, an ECN-CE mark
    or a queue at the bottleneck of at least 4 ms."""
    if target.cc.family not in BETA:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no slow start rule here")
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace = obs.sender
        seq = analysis.states(trace, BETA[target.cc.family])
        exit_ = next((b for a, b in zip(seq, seq[1:]) if a.state == "SlowStart" and b.state in EXITS), None)
        if exit_ is None:
            return  # still in slow start at the end: nothing to explain
        phase = schedule.phases[0].s2c
        rtt_us = 2 * phase.delay_us
        since = exit_.t_us - EVIDENCE_RTTS * rtt_us
        ours = [r for r in obs.transfer_records() if since <= r.arr_us <= exit_.t_us]
        dropped = [r for r in ours if r.fate == "dropped"]
        marked = [r for r in ours if {"ce", "held", "reordered_by_jitter"} & set(r.marks)]
        queued = max((r.delay_us - phase.delay_us - r.size * 8e6 / phase.rate_bps
                      for r in ours if r.delay_us is not None), default=0.0)
        declared = [l for l in analysis.losses(trace) if since <= l.t_us <= exit_.t_us]
        check(dropped or marked or declared or queued >= MIN_RTT_INCREASE_US, "exit-without-signal", (
            f"{target.id}: slow start ended at t={exit_.t_us / 1e6:.3f} s (→ {exit_.state}"
            f"{', inferred' if exit_.inferred else ''}) with no congestion signal in the {EVIDENCE_RTTS} RTTs before: "
            f"nothing dropped, CE-marked or reordered, no loss declared, at most {queued / 1e3:.1f} ms of queue "
            f"(HyStart++ needs ≥ {MIN_RTT_INCREASE_US / 1e3:.0f} ms)"
        ), queued_us=queued)
