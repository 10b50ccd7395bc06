"""Loss recovery's obligations: losses declared in time, reductions that must happen,
and collapses that must not happen early.

RFC 9002 §6.1.2: "Once a later packet within the same packet number space has been
acknowledged, an endpoint SHOULD declare an earlier packet lost if it was sent a
threshold amount of time in the past" (9/8 · max(smoothed_rtt, latest_rtt)), by a
timer where no acknowledgement comes in time.
RFC 9002 §7.3.2: "The congestion window MUST be set to the reduced value of the slow
start threshold before exiting the recovery period."
RFC 9002 §7.4: "Endpoints MUST NOT ignore the loss of packets that were sent after the
earliest acknowledged packet in a given packet number space."
RFC 9002 §7.6.2: persistent congestion, and the collapse to kMinimumWindow it brings,
needs lost packets whose send times lie further apart than the persistent
congestion duration.
"""

from __future__ import annotations

import bisect

from hypothesis import example, given
from hypothesis import strategies as st

from harness.observe import dialects
from harness.observe.events import Metrics, PacketSent, PtoExpired, SpuriousLoss
from harness.rfc import K_GRANULARITY_US, K_PACKET_THRESHOLD, K_TIME_THRESHOLD
from harness.schedule import TransferPlan, strategies
from harness.schedule.strategies import QUIC, BaseLink
from harness.schedule.types import Action
from harness.verdict import analysis, blackhole, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(1_000_000,))
#: Sequential small objects: each one ends in a tail, where only the time threshold
#: can declare a loss (fewer than kPacketThreshold packets follow it).
TAILS_PLAN = TransferPlan(sizes=(20_000,) * 8, testcase="transfer")
#: Stacks log a window change and the event behind it microseconds apart, in either
#: order (µs).
ORDER_SLACK_US = 1_000
#: The loss timer may fire this late (two of §6.1.2's kGranularity), µs.
TIMER_SLACK_US = 2 * K_GRANULARITY_US
#: A cut by less than this share is no reduction (harness/observe/reductions.py).
NO_REDUCTION = 1 - analysis.REDUCTION_FRACTION


def _windows(trace) -> list[tuple[float, int, int | None]]:
    return [(t, c, s) for t, c, _, s in analysis.cwnd_series(trace)]


@example(schedule=strategies.CLEAN_LINK)
@example(schedule=BaseLink().schedule(0, actions=[Action("s2c", 200, "drop", flow=QUIC)]))
@given(schedule=strategies.loss_only())
def test_recovery_ends_at_the_reduced_window(longlook, target, schedule):
    """RFC 9002 §7.3.2: each recovery period — opened by a declared loss of a packet
    sent after the previous period began, closed when a packet sent after it opened
    is acknowledged — brings the window, at once or gradually (PRR), to at most the
    reduced ssthresh plus one datagram by its end: ssthresh as logged, and in any case
    a reduction of more than 10% (kMinimumWindow floors it). Periods opened in slow
    start judge §7.3.1's MUST as well: the sender leaves slow start on a loss.
    Trigger: a recovery period that ended."""
    if BETA.get(target.cc.family) is None:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no multiplicative decrease")
    outcomes.require(target, "packet_lost")
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        sent = {p.pn: p.t_us for p in trace.of(PacketSent) if p.space == "application"}
        view = obs.wire
        # Only a packet in flight is a congestion signal (§7.3.2, B.8): stacks also
        # declare ACK-only packets lost.
        eliciting = {p.pn for d in view.datagrams if d.entered and d.direction == "s2c"
                     for p in d.packets if p.space == "application" and p.ack_eliciting}
        acks = analysis.first_acks(trace, view)
        windows = _windows(trace)
        times = [t for t, _, _ in windows]
        ended, missing = 0, []
        start = None
        # The sender's first instant: a controller created then may take a packet sent
        # at that very time for one sent before a recovery period (measured below).
        first_send = min((p.t_us for p in trace.of(PacketSent)), default=None)
        for loss in sorted(analysis.losses(trace), key=lambda e: e.t_us):
            if loss.space != "application" or loss.pn not in eliciting or (
                    start is not None and sent.get(loss.pn, -1) <= start):
                continue
            start = loss.t_us
            end = next((t for t, pn in acks if t >= start and sent.get(pn, -1) > start), None)
            if end is None or not windows:
                continue
            ended += 1
            i = bisect.bisect_left(times, start - ORDER_SLACK_US)
            before = max([c for _, c, _ in windows[max(i - 1, 0):bisect.bisect_left(times, start)]], default=None)
            during = windows[i:bisect.bisect_right(times, end + ORDER_SLACK_US)]
            if before is None:
                continue
            logged = [s for _, _, s in during if s is not None]
            target_b = max(min([*logged[-1:], NO_REDUCTION * before]), 2 * mss)
            lowest = min([c for _, c, _ in during], default=before)
            if lowest > target_b + mss:
                missing.append((start, end, before, lowest, target_b, loss.pn))
        if not ended:
            outcomes.not_exercised("no recovery period ended in this run")
        first = missing[0] if missing else None
        later = sum(1 for m in missing if sent.get(m[5]) != first_send)
        check(not missing, "no-reduction-in-recovery", lambda: (
            f"{target.id}: {len(missing)} of {ended} recovery periods ended above the reduced window; first: "
            f"opened by the loss of pn {first[5]} at t={first[0] / 1e6:.4f} s with cwnd {first[2]}, ended at "
            f"t={first[1] / 1e6:.4f} s with the window never below {first[3]} B (ssthresh or a >10% cut: "
            f"{first[4]:.0f} B, one datagram {mss} B of slack)"
        ), unreduced=len(missing), lowest_over_before=first[3] / first[2] if first else 0.0,
            # Of those, the periods opened by a packet sent after the sender's first instant.
            unreduced_after_first_send=later)


@example(schedule=strategies.dark(BaseLink(), 0, 600, 1500))
@example(schedule=BaseLink().schedule(0, actions=[Action("s2c", i, "drop", flow=QUIC) for i in range(200, 206)]))
@given(schedule=st.one_of(strategies.loss_only(), strategies.blackholes()))
def test_no_collapse_before_persistent_congestion(longlook, target, schedule):
    """RFC 9002 §7.6.2: the window collapses to kMinimumWindow (a cut from at least 8
    datagrams to at most 3, below what β explains) only after the link dropped every datagram of the
    transfer sent over more than the persistent congestion duration, measured between
    two ack-eliciting ones ("These two packets MUST be ack-eliciting"),
    3 × (smoothed_rtt + max(4·rttvar, kGranularity)) by the sender's last logged
    estimates (max_ack_delay left out, in the sender's favour). Read off the ground
    truth. Trigger: the link dropped a datagram of the transfer."""
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, TransferPlan(sizes=(2_000_000,)), timeout_s=60) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        records = sorted((r for r in obs.transfer_records() if r.fate != "duplicate"), key=lambda r: r.arr_us)
        if not any(r.fate == "dropped" for r in records):
            outcomes.not_exercised("the link dropped no datagram of the transfer")
        collapses = blackhole.collapses(trace, target.cc.family)
        estimates = [(m.t_us, m.smoothed_rtt_us, m.rtt_variance_us) for m in trace.of(Metrics)
                     if m.smoothed_rtt_us is not None]
        base = 2 * (schedule.phases[0].s2c.delay_us or 0)
        eliciting = blackhole.ack_eliciting_by_link_index(obs) if collapses else {}
        prev = float("-inf")
        for c in collapses:
            srtt, var = next(((s, v) for t, s, v in reversed(estimates) if t < c.t_us), (base, 0.0))
            duration = 3 * (srtt + max(4 * (var or 0.0), K_GRANULARITY_US))
            longest = analysis.longest_dropped_span(records, eliciting, prev, c.t_us)
            check(longest >= duration - K_GRANULARITY_US, "early-collapse", lambda: (
                f"{target.id}: {c.describe()}, a collapse to kMinimumWindow ({2 * mss} B), but the longest run of "
                f"the transfer's datagrams the link dropped before it spans {longest / 1e3:.1f} ms between two "
                f"ack-eliciting ones, less than the "
                f"persistent congestion duration {duration / 1e3:.1f} ms (smoothed RTT {srtt / 1e3:.1f} ms, "
                f"rttvar {(var or 0) / 1e3:.1f} ms)"
            ), loss_span_over_duration=longest / duration)
            prev = c.t_us


def _worst_delay_over_rtt(late) -> float:
    """The latest declaration among `late` (pn, sent, deadline, declared, rtt, …), in
    RTTs after its send; -1 when one was never declared, a case of its own."""
    if any(d is None or not rtt for _, _, _, d, rtt, *_ in late):
        return -1.0
    return max(((d - t) / rtt for _, t, _, d, rtt, *_ in late), default=0.0)


def _time_threshold_deadline(t_sent: float, t_later: float, rtts) -> tuple[float, float]:
    """(when §6.1.2's time threshold declares a packet sent at `t_sent` lost, the RTT
    it counts from): kTimeThreshold × the largest RTT the sender logged up to then
    after the send, and no earlier than `t_later`, when a later packet was first
    acknowledged."""
    deadline, rtt = t_later, 0.0
    for _ in range(2):  # the RTT logged up to the deadline sets the deadline
        rtt = max([r for t, r in rtts if t <= deadline], default=0.0)
        deadline = max(t_later, t_sent + K_TIME_THRESHOLD * rtt)
    return deadline, rtt


def _losses_to_judge(obs, trace, view):
    """What both loss-detection properties read: the sender's application packets'
    send times, when it first declared each lost, the ack-eliciting ones the link
    dropped (ground truth joined to the capture), the first acknowledgement of each
    packet, and (t_us, the larger of smoothed and latest RTT) at each report."""
    sent = {p.pn: p.t_us for p in trace.of(PacketSent) if p.space == "application"}
    declared: dict[int, float] = {}
    for e in analysis.losses(trace):
        if e.space == "application":
            declared.setdefault(e.pn, e.t_us)
    dropped = {r.idx for r in obs.transfer_records() if r.fate == "dropped"}
    pns = sorted(p.pn for d in view.datagrams if d.entered and d.direction == "s2c" and d.link_idx in dropped
                 for p in d.packets if p.space == "application" and p.ack_eliciting and p.pn in sent)
    rtts = [(m.t_us, max(m.smoothed_rtt_us or 0, m.latest_rtt_us or 0)) for m in trace.of(Metrics)
            if m.smoothed_rtt_us or m.latest_rtt_us]
    return sent, declared, pns, analysis.first_acks(trace, view), rtts


@example(schedule=BaseLink().schedule(0, actions=[Action("s2c", i, "drop", flow=QUIC) for i in range(24, 160, 7)]))
@given(schedule=strategies.loss_only())
def test_loss_declared_by_time_threshold(longlook, target, schedule):
    """RFC 9002 §6.1.2: a packet the link dropped is declared lost (qlog packet_lost)
    no later than kTimeThreshold × max(smoothed_rtt, latest_rtt) (the largest the
    sender logged meanwhile) after it was sent, or when a later packet is first
    acknowledged if that is later, plus 2 ms of timer slack. Small objects fetched
    one after another end in tails, where the packet threshold cannot apply. Trigger:
    a dropped packet whose deadline came before kPacketThreshold later packets were
    acknowledged, with at least one later packet acknowledged before it."""
    outcomes.require(target, "packet_lost")
    outcomes.require(target, "smoothed_rtt")  # the deadline is the sender's own RTT's
    with longlook.run(target, schedule, TAILS_PLAN) as obs:
        obs.completed()
        trace = obs.sender
        view = obs.wire
        sent, declared, pns, acks, rtts = _losses_to_judge(obs, trace, view)
        end_of_trace = trace.events[-1].t_us
        tails, late, judged = 0, [], 0
        for pn in pns:
            later = [t for t, q in acks if q > pn]
            if not later:
                continue  # nothing later acknowledged: a PTO's business (§6.2)
            t_sent, t_later = sent[pn], min(later)
            deadline, rtt = _time_threshold_deadline(t_sent, t_later, rtts)
            if deadline + TIMER_SLACK_US > end_of_trace:
                continue
            judged += 1
            acked_by_then = sum(1 for t, q in acks if q > pn and t <= deadline)
            tails += acked_by_then < K_PACKET_THRESHOLD
            t_decl = declared.get(pn)
            if t_decl is None or t_decl > deadline + TIMER_SLACK_US:
                late.append((pn, t_sent, deadline, t_decl, rtt))
        if not tails:
            outcomes.not_exercised(f"no dropped packet needed the time threshold ({judged} judged by deadline)")
        first = late[0] if late else None
        check(not late, "loss-declared-late", lambda: (
            f"{target.id}: {len(late)} of {judged} dropped packets were declared lost after the time threshold; "
            f"first: pn {first[0]} sent at t={first[1] / 1e6:.4f} s, deadline t={first[2] / 1e6:.4f} s "
            f"(9/8 × {first[4] / 1e3:.1f} ms), declared "
            + (f"at t={first[3] / 1e6:.4f} s" if first[3] is not None else "never")
        ), late=len(late), delay_over_rtt=((first[3] - first[1]) / first[4]) if first and first[3] and first[4] else -1.0)


@example(schedule=BaseLink().schedule(0, actions=[Action("s2c", i, "drop", flow=QUIC) for i in range(24, 160, 7)]))
@given(schedule=strategies.loss_only())
def test_loss_timer_declares_without_a_further_ack(longlook, target, schedule):
    """RFC 9002 §6.1.2: "If packets sent prior to the largest acknowledged packet
    cannot yet be declared lost, then a timer SHOULD be set for the remaining time."
    A dropped packet whose later packet was acknowledged at least kGranularity before
    its time threshold expired (the deadline of test_loss_declared_by_time_threshold),
    with no acknowledgement of anything new reaching the sender from the deadline to
    TIMER_SLACK_US past it: nothing but that timer can declare it then, and it must be
    declared by that time, not at the next acknowledgement or probe timeout. The tails
    of small objects fetched one after another leave such packets. Trigger: one such
    packet."""
    outcomes.require(target, "packet_lost")
    outcomes.require(target, "smoothed_rtt")  # the deadline is the sender's own RTT's
    with longlook.run(target, schedule, TAILS_PLAN) as obs:
        obs.completed()
        trace, view = obs.sender, obs.wire
        sent, declared, pns, acks, rtts = _losses_to_judge(obs, trace, view)
        end_of_trace = trace.events[-1].t_us
        arrivals = sorted(t for t, _ in acks)
        waited, late = 0, []
        for pn in pns:
            later = [t for t, q in acks if q > pn]
            if not later:
                continue  # nothing later acknowledged: a PTO's business (§6.2)
            t_later = min(later)
            deadline, rtt = _time_threshold_deadline(sent[pn], t_later, rtts)
            if deadline - t_later < K_GRANULARITY_US or deadline + TIMER_SLACK_US > end_of_trace:
                continue  # the acknowledgement itself could declare it, or the trace ends first
            k = bisect.bisect_left(arrivals, deadline)
            next_ack = arrivals[k] if k < len(arrivals) else float("inf")
            if next_ack <= deadline + TIMER_SLACK_US:
                continue  # an acknowledgement arrived in time to declare it
            waited += 1
            t_decl = declared.get(pn)
            if t_decl is None or t_decl > deadline + TIMER_SLACK_US:
                late.append((pn, sent[pn], deadline, t_decl, rtt, next_ack))
        if not waited:
            outcomes.not_exercised("no dropped packet was left for the loss timer (a later packet acknowledged "
                                   "before its time threshold, and no acknowledgement near the threshold)")
        first = late[0] if late else None
        check(not late, "loss-timer-not-set", lambda: (
            f"{target.id}: {len(late)} of {waited} dropped packets left for the loss timer were not declared lost "
            f"when their time threshold expired; first: pn {first[0]} sent at t={first[1] / 1e6:.4f} s, "
            f"threshold t={first[2] / 1e6:.4f} s (9/8 × {first[4] / 1e3:.1f} ms), no new acknowledgement until "
            + (f"t={first[5] / 1e6:.4f} s" if first[5] != float("inf") else "the end")
            + ", declared " + (f"at t={first[3] / 1e6:.4f} s" if first[3] is not None else "never")
        ), late=len(late), delay_over_rtt=_worst_delay_over_rtt(late))


@example(schedule=BaseLink().schedule(0, actions=[Action("s2c", i, "drop", flow=QUIC) for i in range(24, 160, 7)]))
@given(schedule=strategies.loss_only())
def test_loss_declared_by_packet_threshold(longlook, target, schedule):
    """RFC 9002 §6.1.1: a packet the link dropped is declared lost (qlog packet_lost)
    by the time the sender learns of the acknowledgement of the kPacketThreshold-th
    (3, the example's initial value) packet it sent after it, plus 2 ms of timer slack
    (and the handling window of a stack that logs a packet after its effects, or up
    to the report of a stack that reports once it has handled the packet), or
    earlier by the time threshold. Judged up to the sender's first spurious loss (a
    stack may raise its threshold after one, as RACK does). Trigger: a dropped packet
    whose packet-threshold acknowledgement came before its time threshold."""
    outcomes.require(target, "packet_lost")
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace, view = obs.sender, obs.wire
        sent, declared, pns, acks, rtts = _losses_to_judge(obs, trace, view)
        spurious = min((e.t_us for e in trace.of(SpuriousLoss)), default=float("inf"))
        by_packets, late, judged = 0, [], 0
        # A stack that logs a packet after handling it (quic-go, tquic) has its ACKs
        # placed where their effects may begin, up to HANDLING_US early: the slack
        # takes that in, so a declaration in the same handling is never late.
        stack = target.stack
        dialect = dialects.of_stack(stack.name, bool(stack.honours.get("qlog")))
        slack = TIMER_SLACK_US + (dialect.HANDLING_US if dialect.received_after_handling else 0.0)
        # A stack that logs a packet before handling it and reports once it has (kwik)
        # declares what the ACK revealed by that report, however late the handling ran.
        reports = sorted(m.t_us for m in trace.of(Metrics)) if dialect.reports_after_handling else []

        def handled_by(t_us: float) -> float:
            i = bisect.bisect_left(reports, t_us)
            return reports[i] if i < len(reports) else t_us
        numbers = sorted(sent)
        for pn in pns:
            # The first acknowledgement of the kPacketThreshold-th packet sent after it,
            # or of any later one. Counted in packets sent, not in packet numbers: a
            # number a stack skips (quic-go does, against optimistic ACKs) is no packet.
            i = bisect.bisect_right(numbers, pn) + K_PACKET_THRESHOLD - 1
            if i >= len(numbers):
                continue
            t_pt = next((t for t, q in acks if q >= numbers[i]), None)
            if t_pt is None or t_pt >= spurious:
                continue
            judged += 1
            rtt = max([r for t, r in rtts if t <= t_pt], default=0.0)
            by_packets += t_pt < sent[pn] + K_TIME_THRESHOLD * rtt
            t_decl = declared.get(pn)
            if t_decl is None or t_decl > max(t_pt + slack, handled_by(t_pt)):
                later = sum(1 for t, q in acks if q > pn and t <= (t_decl if t_decl is not None else float("inf")))
                late.append((pn, sent[pn], t_pt, t_decl, later))
        if not by_packets:
            outcomes.not_exercised(f"no dropped packet reached the packet threshold before its time threshold "
                                   f"({judged} judged)")
        first = late[0] if late else None
        check(not late, "packet-threshold-late", lambda: (
            f"{target.id}: {len(late)} of {judged} dropped packets were not declared lost when the "
            f"{K_PACKET_THRESHOLD}rd packet sent after each was acknowledged; first: pn {first[0]} sent at "
            f"t={first[1] / 1e6:.4f} s, that packet acknowledged at t={first[2] / 1e6:.4f} s, "
            + (f"declared at t={first[3] / 1e6:.4f} s, after {first[4]} later packets were acknowledged"
               if first[3] is not None else "never declared")
        ), late=len(late), later_acked=first[4] if first else 0)


@example(schedule=BaseLink().schedule(0, actions=[Action("s2c", i, "drop", flow=QUIC) for i in range(24, 160, 7)]))
@given(schedule=strategies.loss_only())
def test_no_loss_is_ignored(longlook, target, schedule):
    """RFC 9002 §7.4: the sender does not ignore the loss of a packet sent after the
    earliest acknowledged packet of its space. Every ack-eliciting application packet
    the link dropped (ground truth joined to the capture), sent after the first
    application packet that was acknowledged, is declared lost (qlog packet_lost) at
    some time, once the sender had what loss detection needs before its log ended: a
    later packet acknowledged, and the time threshold (9/8 × the largest RTT it
    logged, 2 ms of timer slack) run out. How late does not matter here (the
    threshold properties judge that); never is what this MUST forbids, since a loss
    the sender never declares is one its congestion controller never hears of.
    Small objects one after another (as the time-threshold property fetches), so that
    losses fall in tails as well as in flights, where a PTO may be what finds them.
    Trigger: a dropped packet whose loss the sender had the evidence and the time to
    declare."""
    outcomes.require(target, "packet_lost")
    outcomes.require(target, "smoothed_rtt")  # when the threshold ran out is the sender's own RTT's
    with longlook.run(target, schedule, TAILS_PLAN) as obs:
        obs.completed()
        trace, view = obs.sender, obs.wire
        sent, declared, pns, acks, rtts = _losses_to_judge(obs, trace, view)
        acked = {q for _, q in acks}
        earliest = min((sent[q] for q in acked if q in sent), default=None)
        log_end = max((e.t_us for e in trace.events), default=0.0)
        rtt = max((r for _, r in rtts), default=0.0)
        judged, ignored = 0, []
        for pn in pns:
            if earliest is None or sent[pn] <= earliest or pn in acked:
                continue  # before the earliest acknowledged (§7.4 lets it go), or a copy arrived
            t_later = next((t for t, q in acks if sent.get(q, -1) > sent[pn]), None)
            if t_later is None:
                continue  # nothing sent after it was acknowledged: no evidence of its loss
            deadline = max(t_later, sent[pn] + K_TIME_THRESHOLD * rtt) + TIMER_SLACK_US
            if deadline > log_end:
                continue  # the connection ended before the time threshold ran out
            judged += 1
            if pn not in declared:
                ignored.append((pn, sent[pn], t_later, deadline))
        if not judged:
            outcomes.not_exercised(f"no dropped packet sent after the earliest acknowledged one had its loss "
                                   f"evidence and time threshold before the sender's log ended ({len(pns)} dropped)")
        first = ignored[0] if ignored else None
        # Of those, the ones no PTO expiry (as the sender logged it) followed while they
        # were in flight: a sender that drops a packet quietly when its PTO fires (quic-go,
        # F26, RFC 9002 §6.2) shows none; one that ignores losses otherwise shows some.
        ptos = sorted(e.t_us for e in trace.of(PtoExpired))
        without_pto = sum(1 for pn, t_sent, _, deadline in ignored
                          if bisect.bisect_left(ptos, t_sent) == bisect.bisect_right(ptos, deadline))
        check(not ignored, "loss-ignored", lambda: (
            f"{target.id}: {len(ignored)} of {judged} dropped packets sent after the earliest acknowledged one were "
            f"never declared lost; first: pn {first[0]} sent at t={first[1] / 1e6:.4f} s, a later packet "
            f"acknowledged at t={first[2] / 1e6:.4f} s, the sender's log running to t={log_end / 1e6:.4f} s; "
            f"{without_pto} of them with no PTO expiry logged while in flight"
        ), ignored=len(ignored), ignored_share=len(ignored) / judged, without_pto=without_pto)
