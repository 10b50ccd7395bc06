"""Liveness: a transfer always completes when the schedule leaves the link usable.

Source: the issue's property 11; RFC 9002 §6.2 (PTO guarantees progress after tail
loss) and §7.6 (persistent congestion must not stall the connection forever).
"""

from hypothesis import given

from harness.schedule import TransferPlan, strategies
from harness.verdict.bounds import transfer_time_bound_s
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(500_000,))


@given(schedule=strategies.combinations())
def test_transfer_completes_under_loss_and_reordering(longlook, target, schedule):
    """Loss (iid, bursty, by index), shallow reordering and jitter never stall it."""
    bound = transfer_time_bound_s(schedule, sum(PLAN.sizes))
    with longlook.run(target, schedule, PLAN, timeout_s=bound) as obs:
        r = obs.result
        check(r.ok, "transfer-failed", f"{target.id}: transfer failed within the {bound:.0f} s bound: {r.reason}",
              reason=str(r.reason))


@given(schedule=strategies.blackholes())
def test_transfer_completes_after_a_blackhole(longlook, target, schedule):
    """A blackhole of up to 3 s in the data direction is survived (PTO probes resume)."""
    bound = transfer_time_bound_s(schedule, sum(PLAN.sizes))
    with longlook.run(target, schedule, PLAN, timeout_s=bound) as obs:
        r = obs.result
        check(r.ok, "transfer-failed",
              f"{target.id}: transfer failed within the {bound:.0f} s bound after a blackhole: {r.reason}",
              reason=str(r.reason))
