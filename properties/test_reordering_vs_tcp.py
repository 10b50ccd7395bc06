"""Reordering resilience: QUIC does not fall far behind kernel TCP under reordering.

Kakhki et al. (IMC'17 §5) found QUIC read reordering as loss and slowed down where
TCP did not. Reordering beyond kPacketThreshold is loss by RFC 9002 §6.1.1, but §6.1
lets a sender adapt its thresholds and §6.2/Appendix B let it learn that a loss was
spurious; Linux TCP does both (RACK, DSACK undo). Under the same schedule of holds,
applied to the QUIC flow in one run and to a kernel TCP flow of the same family in
the other, the QUIC transfer's goodput is at least 1 / GOODPUT_FACTOR of TCP's. The
losses the QUIC sender declared although the datagram was delivered (spurious, from
the ground truth) are named in the report.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from harness.observe.events import PacketLost
from harness.run import Inconclusive, baseline_target
from harness.schedule import Action, FlowSelector, Schedule, TransferPlan, strategies
from harness.schedule.strategies import BaseLink
from harness.verdict import outcomes
from harness.verdict.profiles import slow
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(4_000_000,))
#: QUIC's goodput may trail TCP's by at most this factor.
GOODPUT_FACTOR = 2.0
#: Holds span the whole transfer: 4 MB is about 3300 QUIC datagrams.
LAST_INDEX = 3300


def periodic_holds(base: BaseLink, seed: int, every: int, k: int, proto: str = "udp") -> Schedule:
    """Every `every`-th server→client datagram of `proto` held behind the next `k`,
    on a link with a deep queue (nothing else is impaired)."""
    flow = FlowSelector(proto)
    holds = [Action("s2c", i, "hold", flow=flow, k=k) for i in range(every, LAST_INDEX, every)]
    return base.schedule(seed, actions=holds, queue_bdp=strategies.REORDER_QUEUE_BDP)


def for_protocol(schedule: Schedule, proto: str) -> Schedule:
    """The same schedule with its actions applied to `proto`'s flows instead."""
    return replace(schedule, actions=tuple(replace(a, flow=FlowSelector(proto)) for a in schedule.actions))


periodic_reordering = strategies.replayable(lambda: st.builds(
    periodic_holds, st.just(BaseLink()), strategies.seeds,
    st.sampled_from([50, 20, 100]), st.integers(min_value=3, max_value=6),
))()


@pytest.mark.real_time_only("the baseline is kernel TCP")
@slow
@example(schedule=periodic_holds(BaseLink(), 0, every=50, k=3))
@given(schedule=periodic_reordering)
def test_reordering_costs_quic_no_more_than_tcp(longlook, target, schedule):
    """One datagram in `every` held behind the next k ≥ 3: QUIC's goodput stays
    within GOODPUT_FACTOR of kernel TCP's on the same schedule."""
    tcp = baseline_target(target.cc.family)
    if tcp is None:
        outcomes.not_applicable(f"no kernel TCP controller of the {target.cc.family} family")
    with longlook.together():  # a failure keeps the TCP baseline's artifacts too
        with longlook.run(tcp, for_protocol(schedule, "tcp"), PLAN) as baseline:
            if not baseline.result.ok:  # no baseline, no comparison: not the stack's deviation
                raise Inconclusive(f"kernel TCP failed under the same holds: {baseline.result.reason}")
            tcp_bps = baseline.result.goodput_bps
        with longlook.run(target, schedule, PLAN) as obs:
            obs.completed()
            busy = obs.result.saturated()
            if busy:
                raise Inconclusive(f"{busy}: endpoint-bound, not link-bound")
            quic_bps = obs.result.goodput_bps
            held = sum(1 for r in obs.ground_truth.records if "held" in r.marks and r.dir == "s2c")
            declared, spurious = _spurious(obs)
            check(quic_bps * GOODPUT_FACTOR >= tcp_bps, "slower-than-tcp", (
                f"{target.id}: with {held} datagrams each held behind {schedule.actions[0].k} others, QUIC's goodput "
                f"was {quic_bps / 1e6:.2f} Mbit/s against kernel TCP {target.cc.family}'s {tcp_bps / 1e6:.2f} Mbit/s "
                f"on the same schedule (×{tcp_bps / max(quic_bps, 1):.1f} slower; at most ×{GOODPUT_FACTOR}); "
                f"the sender declared {declared} losses, {spurious} of them spurious (the link dropped nothing)"
            ), slowdown=tcp_bps / max(quic_bps, 1), spurious=spurious)


def _spurious(obs) -> tuple[int | str, int | str]:
    """(losses declared, of which spurious: the link delivered the datagram)."""
    try:
        lost = obs.sender.of(PacketLost)
    except Inconclusive:
        return "unknown", "unknown"
    dropped = sum(1 for r in obs.ground_truth.records if r.dir == "s2c" and r.fate == "dropped")
    # Nothing was dropped on this link, so every declared loss was spurious.
    return len(lost), (len(lost) if dropped == 0 else "unknown")
