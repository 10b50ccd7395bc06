"""Reordering within RFC 9002's thresholds is not loss.

RFC 9002 §6.1: a packet is declared lost only when kPacketThreshold (3) later
packets are acknowledged, or kTimeThreshold (9/8 RTT) has passed. Kakhki et al.
(IMC'17 §5) found QUIC reading reordering as loss and slowing down.
RFC 9002 §6.1.2: "To avoid declaring packets as lost too early, this time threshold
MUST be set to at least the local timer granularity, as indicated by the kGranularity
constant."
"""

from __future__ import annotations

import pytest
from hypothesis import example, given

from harness.observe.events import Metrics, PacketSent
from harness.rfc import K_GRANULARITY_US, K_PACKET_THRESHOLD, K_TIME_THRESHOLD
from harness.schedule import TransferPlan, strategies
from harness.schedule.strategies import QUIC, BaseLink
from harness.schedule.types import Action
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
#: Holds a receiver sees: at 4 Mbit/s a datagram held behind the next two arrives 5 ms
#: after them, past any receiver's ACK timer, on a 100 ms path (RTT/8: 12.5 ms).
SLOW_HOLDS = BaseLink(rate_bps=4_000_000, rtt_us=100_000).schedule(
    0, actions=[Action("s2c", i, "hold", flow=QUIC, k=2) for i in (60, 160, 260, 360, 460)],
    queue_bdp=strategies.REORDER_QUEUE_BDP)


def schedule_rtt_us(schedule) -> float:
    """The link's base RTT: no RTT the sender measures is smaller."""
    phase = schedule.phases[0]
    return (phase.s2c.delay_us or 0) + (phase.c2s.delay_us or 0)


def largest_acked_by(acks: list[tuple[float, int]], t_us: float) -> int:
    """The largest packet number acknowledged by `t_us` (-1: none), from first_acks.
    §6.1.1's packet threshold is a distance in packet numbers from it
    ("largest_acked_packet - kPacketThreshold"), not a count of later packets
    acknowledged: packets between may still be on their way."""
    return max((q for t, q in acks if t <= t_us), default=-1)


def by_neither_threshold(trace, view, declared) -> list[tuple]:
    """(loss, why) for each declared application loss that neither of §6.1's thresholds
    allowed by the sender's own account when it was declared: the largest acknowledged
    fewer than kPacketThreshold packet numbers on, and less than kTimeThreshold ×
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
        later = largest_acked_by(acks, loss.t_us + ORDER_SLACK_US) - loss.pn
        rtt = next((r for t, r in reversed(rtts) if t <= loss.t_us), 0.0)
        age = loss.t_us - sent[loss.pn]
        if later >= K_PACKET_THRESHOLD or (later > 0 and age >= K_TIME_THRESHOLD * rtt - K_GRANULARITY_US):
            continue
        out.append((loss, f"pn {loss.pn} declared {age / 1e3:.2f} ms after it was sent, the largest acknowledged "
                          f"{max(later, 0)} packet numbers on, where 9/8 × {rtt / 1e3:.2f} ms = "
                          f"{K_TIME_THRESHOLD * rtt / 1e3:.2f} ms"))
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
@example(schedule=SLOW_HOLDS)
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


#: Small objects one after another: each a flight of a few datagrams that an extra
#: delay lets its successors overtake, with the queue (and so the sender's RTT) near
#: empty between them.
FLOOR_PLAN = TransferPlan(sizes=(4_000,) * 40, testcase="transfer")
#: A send and the loss it became are logged on one clock: this covers their rounding
#: and a send logged a little after the stack stamped it (µs).
FLOOR_SLACK_US = 100
#: An ACK and the losses it reveals are logged this close on a sub-millisecond link
#: (µs); ORDER_SLACK_US's whole millisecond would swallow the floor being judged.
FLOOR_ORDER_US = 100


def _rtt_at(rtts: list[tuple[float, float]], t_us: float) -> float:
    return next((r for t, r in reversed(rtts) if t <= t_us), 0.0)


def _rtts(trace) -> list[tuple[float, float]]:
    return [(m.t_us, max(m.smoothed_rtt_us or 0, m.latest_rtt_us or 0)) for m in trace.of(Metrics)
            if m.smoothed_rtt_us or m.latest_rtt_us]


def floor_breaches(trace, view) -> list[tuple]:
    """(loss, its age, why) per declared application loss that only the time threshold can have
    declared (the largest acknowledged by then fewer than kPacketThreshold packet numbers
    on) less than
    kGranularity after its packet was sent, both by the sender's own clock."""
    sent = {p.pn: p.t_us for p in trace.of(PacketSent) if p.space == "application"}
    acks = analysis.first_acks(trace, view)
    rtts = _rtts(trace)
    out = []
    for loss in analysis.losses(trace):
        if loss.space != "application" or loss.pn not in sent:
            continue
        later = largest_acked_by(acks, loss.t_us + FLOOR_ORDER_US) - loss.pn
        age = loss.t_us - sent[loss.pn]
        if later >= K_PACKET_THRESHOLD or age >= K_GRANULARITY_US - FLOOR_SLACK_US:
            continue
        rtt = _rtt_at(rtts, loss.t_us)
        out.append((loss, age, f"pn {loss.pn} declared lost {age:.0f} µs after it was sent, the largest acknowledged "
                               f"{max(later, 0)} packet numbers on, where max(9/8 × {rtt:.0f} µs, kGranularity) = "
                          f"{max(K_TIME_THRESHOLD * rtt, K_GRANULARITY_US):.0f} µs"))
    return out


def floor_triggers(trace, view) -> list[int]:
    """Packets whose acknowledgement put the floor to work, by the wire: a later packet
    acknowledged first (none kPacketThreshold packet numbers on), and its own ACK
    reaching the sender after 9/8 × the sender's max(smoothed_rtt, latest_rtt) at that
    moment but within kGranularity of its send. A sender without the floor declares it
    lost; one with it does not."""
    sent: dict[int, float] = {}
    for d in view.datagrams:
        if d.entered and d.direction == "s2c":
            for p in d.packets:
                if p.space == "application" and p.pn is not None and p.ack_eliciting:
                    sent.setdefault(p.pn, d.t_us)
    acks = analysis.wire_first_acks(view)
    own = {pn: t for t, pn in acks}
    rtts = _rtts(trace)
    out = []
    for pn, t_sent in sent.items():
        t_own = own.get(pn)
        if t_own is None or t_own - t_sent >= K_GRANULARITY_US - FLOOR_SLACK_US:
            continue
        overtakers = [t for t, q in acks if q > pn and t < t_own]
        if overtakers and largest_acked_by(acks, t_own - 1) - pn < K_PACKET_THRESHOLD \
                and t_sent + K_TIME_THRESHOLD * _rtt_at(rtts, overtakers[0]) < t_own - FLOOR_SLACK_US:
            out.append(pn)
    return out


@example(schedule=BaseLink(rate_bps=1_000_000_000, rtt_us=200).schedule(
    0, actions=[Action("s2c", i, "delay", flow=QUIC, extra_us=300) for i in (8, 20, 33, 47, 62, 80, 101, 125)]))
@given(schedule=strategies.sub_granularity_delays())
def test_time_threshold_is_at_least_the_granularity(longlook, target, schedule):
    """RFC 9002 §6.1.2: the time threshold is at least kGranularity (1 ms). On a link
    whose round trip is a few hundred µs, datagrams delayed by less than a millisecond
    are overtaken by the rest of their small flight; no packet is declared lost, with
    the largest acknowledged fewer than kPacketThreshold packet numbers on, less than
    kGranularity after it was sent. Trigger: a packet acknowledged after a later one, after 9/8 of
    the sender's RTT but within kGranularity of its send."""
    outcomes.require(target, "packet_lost")
    outcomes.require(target, "smoothed_rtt")  # the trigger is judged by the sender's own RTT
    # A sender whose RTT never falls below 8/9 ms (aioquic floors its samples at 1 ms)
    # never meets the trigger: its examples count toward max_examples, not a hunt.
    with outcomes.rare_trigger(), longlook.run(target, schedule, FLOOR_PLAN) as obs:
        obs.completed()
        trace, view = obs.sender, obs.wire
        breaches = floor_breaches(trace, view)
        triggers = floor_triggers(trace, view)
        if not breaches and not triggers:
            outcomes.not_exercised("no packet was acknowledged after a later one between 9/8 of the sender's RTT "
                                   "and kGranularity after its send")
        check(not breaches, "loss-before-granularity", lambda: (
            f"{target.id}: {len(breaches)} packets declared lost by time less than kGranularity (1 ms) after they "
            f"were sent (pn {[b[0].pn for b in breaches[:8]]}); {len(triggers)} packets came back between 9/8 of "
            f"the RTT and 1 ms after their successors; first: {breaches[0][2]}"
        ), declared=len(breaches), least_age_us=min((b[1] for b in breaches), default=0.0))
