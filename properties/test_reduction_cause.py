"""Every window reduction has a cause.

RFC 9002 §7.3.2, §7.6.2 and §7.8 name what may reduce a loss-based sender's
congestion window: packets declared lost (really lost, or reordered beyond the
thresholds of §6.1), an ECN-CE mark (§7.1), persistent congestion; RFC 9438 §5.8 and
RFC 7661 add a restart after idle. A reduction with none of these in the emulator's
ground truth is a controller acting on nothing the network did.

Causes come from harness.observe.reductions, matched through the sender side's
decrypted capture (by packet number) where the key log fits, else by time.
"""

from __future__ import annotations

from hypothesis import example, given

from harness.observe.join import join
from harness.observe.reductions import reductions_with_cause
from harness.run import Inconclusive
from harness.schedule import TransferPlan, strategies
from harness.verdict import outcomes
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(1_000_000,))


@example(schedule=strategies.CLEAN_LINK)
@given(schedule=strategies.combinations())
def test_every_window_reduction_has_a_cause(longlook, target, schedule):
    """No reduction of the window without a loss (real or reordering), an ECN-CE
    mark, persistent congestion or an idle restart in the ground truth."""
    if target.cc.family not in ("newreno", "cubic"):
        outcomes.not_applicable(f"{target.cc.name} is not loss-based: it may reduce its window without a congestion event")
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        try:
            joined = join(obs.wire, obs.ground_truth)
        except Inconclusive:
            joined = None
        causes = reductions_with_cause(obs.sender, obs.ground_truth, joined)
        causeless = [c for c in causes if c.cause == "none"]
        check(not causeless, "causeless-reduction", lambda: (
            f"{target.id}: {len(causeless)} of {len(causes)} window reductions have no cause in the ground "
            f"truth; first: {causeless[0].describe()}"
        ), causeless=len(causeless))
