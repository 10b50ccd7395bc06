"""Reordering within RFC 9002's thresholds is not loss.

RFC 9002 §6.1: a packet is declared lost only when kPacketThreshold (3) later
packets are acknowledged, or kTimeThreshold (9/8 RTT) has passed. Kakhki et al.
(IMC'17 §5) found QUIC reading reordering as loss and slowing down.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given

from harness.observe.events import Metrics, PacketSent
from harness.rfc import K_GRANULARITY_US, K_PACKET_THRESHOLD, K_TIME_THRESHOLD
from harness.schedule import TransferPlan, strategies
from harness.verdict import analysis, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(1_000_000,))
#: A stack logs an ACK's acknowledgements and the losses it reveals microseconds apart,
#: in either order: events this close are taken as simultaneous (µs).
ORDER_SLACK_US = 1_000
#: kTimeThreshold − 1: a datagram arriving more than RTT/8 after it would have
#: (after the ones that overtook it) may be declared lost by the time threshold.
TIME_SLACK = 9 / 8 - 1


def schedule_rtt_us(schedule) -> float:
    """The link's base RTT: no RTT the sender measures is smaller."""
    phase = schedule.phases[0]
    return (phase.s2c.delay_us or 0) + (phase.c2s.delay_us or 0)


def by_neither_threshold(trace, view, declared) -> list[tuple]:
    """(loss, why) for each declared application loss that neither of §6.1's thresholds
    allowed by the sender's own account when it was declared: fewer than
    kPacketThreshold later packets acknowledged, and less than kTimeThreshold ×
    max(smoothed_rtt, latest_rtt) (its last logged values) since the packet was sent,
    less kGranularity for the timer and the log's timestamps."""
    sent = {p.pn: p.t_us for p in trace.of(PacketSent) if p.space == "application"}
    acks = analysis.first_acks(trace, view)
    rtts = [(m.t_us, max(m.smoothed_rtt_us or 0, m.latest_rtt_us or 0)) for m in trace.of(Metrics)
            if m.smoothed_rtt_us or m.latest_rtt_us]
    out = []
    for loss in declared:
        if loss.space != "application" or loss.pn not in sent:
            continue
        later = sum(1 for t, q in acks if q > loss.pn and t <= loss.t_us + ORDER_SLACK_US)
        rtt = next((r for t, r in reversed(rtts) if t <= loss.t_us), 0.0)
        age = loss.t_us - sent[loss.pn]
        if later >= K_PACKET_THRESHOLD or (later and age >= K_TIME_THRESHOLD * rtt - K_GRANULARITY_US):
            continue
        out.append((loss, f"pn {loss.pn} declared {age / 1e3:.2f} ms after it was sent, with {later} later "
                          f"packets acknowledged, where 9/8 × {rtt / 1e3:.2f} ms = {K_TIME_THRESHOLD * rtt / 1e3:.2f} ms"))
    return out


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
    loss declaration that neither threshold allowed by the sender's own account, and,
    for a loss-based controller, no window reduction (a BBR sender lowers its window
    by its model, e.g. in ProbeRTT, without any loss)."""
    # Whether a loss was allowed is judged by the sender's own RTT (the time threshold).
    outcomes.require(target, "smoothed_rtt")
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
        # The link's delays are not the sender's: a held datagram's own RTT also holds
        # the queue that built since the sender's last RTT sample, so in slow start a
        # hold shorter than RTT/8 on the link can still put it past 9/8 × the sender's
        # max(smoothed_rtt, latest_rtt). A loss its own thresholds allowed when it was
        # declared is by the rule; only the others are spurious.
        spurious = by_neither_threshold(trace, obs.wire, declared)
        if declared and not spurious:
            outcomes.not_exercised(f"the sender's own thresholds allowed all {len(declared)} declared losses "
                                   "(the queue it was building made a held datagram's RTT exceed 9/8 of its estimate)")
        check(not spurious, "spurious-loss", lambda: (
            f"{target.id}: {len(spurious)} packets declared lost (pn {[l.pn for l, _ in spurious[:8]]}, "
            f"triggers {sorted({str(l.trigger) for l, _ in spurious})}) although the link dropped nothing; "
            f"{len(held)} datagrams were held behind at most 2 others; first: {spurious[0][1]}"
        ), declared=len(spurious))
        if target.cc.family in BETA:
            cuts = analysis.reductions(trace)
            check(not cuts, "reduction-without-loss", lambda: f"{target.id}: window reduced without any loss: "
                  f"{cuts[0].describe()}", cuts=len(cuts))
