"""Reordering within RFC 9002's thresholds is not loss.

RFC 9002 §6.1: a packet is declared lost only when kPacketThreshold (3) later
packets are acknowledged, or kTimeThreshold (9/8 RTT) has passed. Kakhki et al.
(IMC'17 §5) found QUIC reading reordering as loss and slowing down.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given

from harness.schedule import TransferPlan, strategies
from harness.verdict import analysis, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(1_000_000,))
#: kTimeThreshold − 1: a datagram arriving more than RTT/8 after it would have
#: (after the ones that overtook it) may be declared lost by the time threshold.
TIME_SLACK = 9 / 8 - 1


def schedule_rtt_us(schedule) -> float:
    """The link's base RTT: no RTT the sender measures is smaller."""
    phase = schedule.phases[0]
    return (phase.s2c.delay_us or 0) + (phase.c2s.delay_us or 0)


def held_extra_delays(records, held):
    """(held record, how much longer it spent in the link than the datagrams that
    overtook it, which were not held and crossed the same queue) per held datagram."""
    delivered = {r.idx: r for r in records if r.dir == "s2c" and r.dep_us is not None}
    for r in held:
        overtakers = [delivered[i] for i in range(r.idx + 1, r.idx + 9)
                      if i in delivered and r.dep_us is not None and delivered[i].dep_us < r.dep_us]
        if overtakers:
            yield r, r.delay_us - min(o.delay_us for o in overtakers)


# Real time only: in virtual time a held datagram and those that overtook it reach the
# receiver in one instant, and the planted kPacketThreshold-1 controller
# (tests/mutants/packet_threshold_one.py) passes there while it fails in real time
# (BENCHMARKS.md, "Mutant zoo"): the property would lose the bug it exists for.
@pytest.mark.real_time_only("a held datagram and those that overtook it reach the receiver in one "
                            "virtual instant, which hides the reordering from the sender's ACKs")
@example(schedule=strategies.CLEAN_DEEP_LINK)
@given(schedule=strategies.reorder_below_threshold())
def test_reordering_below_threshold_causes_no_recovery(longlook, target, schedule):
    """Datagrams held behind fewer than kPacketThreshold others, and for less than
    the time threshold's RTT/8 of extra delay, on a link that drops nothing, cause no
    loss declaration and, for a loss-based controller, no window reduction (a BBR
    sender lowers its window by its model, e.g. in ProbeRTT, without any loss)."""
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        drops = [r for r in obs.ground_truth.records if r.dir == "s2c" and r.fate == "dropped"]
        # The queue can still overflow in slow start; then losses are real and this
        # example says nothing about reordering.
        if drops:
            outcomes.not_exercised(f"the queue dropped {len(drops)} datagrams: real losses, not reordering")
        held = [r for r in obs.ground_truth.records if "held" in r.marks and r.dir == "s2c"]
        # A hold is by depth; if the sender paused, the datagrams that overtake the
        # held one come late, and the time threshold may rightly declare it lost.
        late = [(r.idx, extra) for r, extra in held_extra_delays(obs.ground_truth.records, held)
                if extra > TIME_SLACK * schedule_rtt_us(schedule)]
        if late:
            outcomes.not_exercised(f"{len(late)} held datagrams came late beyond the time threshold's slack")
        trace = obs.sender
        declared = analysis.losses(trace)
        check(not declared, "spurious-loss", lambda: (
            f"{target.id}: {len(declared)} packets declared lost (pn {[l.pn for l in declared[:8]]}, "
            f"triggers {sorted({str(l.trigger) for l in declared})}) although the link dropped nothing; "
            f"{len(held)} datagrams were held behind at most 2 others"
        ), declared=len(declared))
        if target.cc.family in BETA:
            cuts = analysis.reductions(trace)
            check(not cuts, "reduction-without-loss", lambda: f"{target.id}: window reduced without any loss: "
                  f"{cuts[0].describe()}", cuts=len(cuts))
