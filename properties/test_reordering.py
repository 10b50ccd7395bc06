"""Reordering within RFC 9002's thresholds is not loss.

RFC 9002 §6.1: a packet is declared lost only when kPacketThreshold (3) later
packets are acknowledged, or kTimeThreshold (9/8 RTT) has passed. Kakhki et al.
(IMC'17 §5) found QUIC reading reordering as loss and slowing down.
"""

from __future__ import annotations

from hypothesis import assume, example, given

from harness import strategies
from harness.topology import TransferPlan
from properties import analysis

PLAN = TransferPlan(sizes=(1_000_000,))


@example(schedule=strategies.CLEAN_DEEP_LINK)
@given(schedule=strategies.reorder_below_threshold())
def test_reordering_below_threshold_causes_no_recovery(longlook, target, schedule):
    """Datagrams held behind fewer than kPacketThreshold others, on a link that
    drops nothing, cause no loss declaration and no window reduction."""
    with longlook.run(target, schedule, PLAN) as obs:
        assert obs.result.ok, f"{target.id}: transfer failed: {obs.result.reason}"
        drops = [r for r in obs.ground_truth.records if r.dir == "s2c" and r.fate == "dropped"]
        # The queue can still overflow in slow start; then losses are real and this
        # example says nothing about reordering.
        assume(not drops)
        trace = obs.sender
        held = [r for r in obs.ground_truth.records if "held" in r.marks and r.dir == "s2c"]
        declared = analysis.losses(trace)
        assert not declared, (
            f"{target.id}: {len(declared)} packets declared lost (pn {[l.pn for l in declared[:8]]}, "
            f"triggers {sorted({str(l.trigger) for l in declared})}) although the link dropped nothing; "
            f"{len(held)} datagrams were held behind at most 2 others"
        )
        cuts = analysis.reductions(trace)
        assert not cuts, f"{target.id}: window reduced without any loss: {cuts[0].describe()}"
