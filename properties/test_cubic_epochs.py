"""CUBIC's epochs after a cut (RFC 9438 §4.7, §4.9, §5.1): where the curve heads after
a cut from a window smaller than the last one (fast convergence), when a cut may be
undone (only a congestion event found spurious, and never back to smaller values once the window
has regrown past them), and how steep the curve is (C).

The first two run on rate_halvings: a link of hundreds of datagrams' bandwidth-delay
product whose data direction's rate halves after slow start's first overflow, so the
next overflow comes from a smaller window, and every loss is a real drop the link's
ground truth records. The third runs on big_bdp_deepening: the same links, whose
queue deepens after the first overflow so the curve runs for seconds. The late undo runs
on late_spurious_losses: a small-BDP link deepened the same way, and one datagram
delayed by seconds.
"""

from __future__ import annotations

from hypothesis import example, given

from harness import rfc
from harness.observe.join import join
from harness.observe.reductions import REDUCTION_FRACTION, reductions_with_cause, undone
from harness.run import Inconclusive
from harness.schedule import TransferPlan, strategies
from harness.schedule.strategies import BaseLink
from harness.verdict import analysis, growth, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.deviation import check


#: RFC 9438 §4.7: long enough for slow start, a cut, the rate halving and a second
#: cut, and two seconds of the curve after it on rate_halvings' links.
FC_PLAN = TransferPlan(sizes=(12_000_000,))
#: After the second cut the curve is judged this long at most (s), at least FC_MIN_S.
FC_S = 2.0
FC_MIN_S = 0.5
#: The second cut's window below this share of the first's: fast convergence applies
#: whatever W_max the first cut left (the window, or (1 + β) / 2 of it).
FC_BELOW = (1 + BETA["cubic"]) / 2


@example(schedule=strategies.rate_halved(BaseLink(rate_bps=40_000_000, rtt_us=80_000), 0, 1000))
@given(schedule=strategies.rate_halvings())
def test_cubic_heads_for_a_lowered_plateau_after_a_smaller_window(longlook, target, schedule):
    """RFC 9438 §4.7: "the following 'Fast Convergence' mechanism SHOULD be
    implemented": at a congestion event with cwnd below W_max, W_max becomes
    cwnd × (1 + β_cubic) / 2, so the curve after the cut heads for a plateau below the
    window the event came at. The rate halves after a first cut, and the second cut
    comes from a window under FC_BELOW of the first's. After it, within FC_S, the
    window stays within the larger of W_cubic toward that lowered W_max (t + RTT,
    from the cut) and W_est (α at most 1 a round trip), plus half the way to the curve
    toward the cut's own window (two datagrams at least). Trigger:
    such a pair of cuts, FC_MIN_S of congestion avoidance after the second with no
    other cut and data to send, and a curve toward the window of the second cut
    itself (no fast convergence) that would break the bound by more than two
    datagrams."""
    if target.cc.family != "cubic":
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}): fast convergence is CUBIC's")
    outcomes.require(target, "congestion_window")
    outcomes.require(target, "smoothed_rtt")
    # The second, smaller cut depends on where the stack's window stood when the
    # rate halved: a rare trigger.
    with outcomes.rare_trigger(), longlook.run(target, schedule, FC_PLAN, timeout_s=90) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        # Not collapses, and not a cut the sender undid: its curve was abandoned (an
        # undo is judged by the property below).
        every, cuts = growth.standing_cuts(trace, mss)
        pairs = [(a, b) for a, b in zip(cuts, cuts[1:]) if b.before < FC_BELOW * a.before and b.before >= 8 * mss]
        if not pairs:
            outcomes.not_exercised(f"no cut from a window under {FC_BELOW:.2f} of the cut before it")
        series = [(t, c) for t, c, _, _ in analysis.cwnd_series(trace)]
        sends = analysis.ack_eliciting_sends(obs.wire)
        stages = [(first, cut, stage) for first, cut in pairs
                  if (stage := growth.stage_after(trace, sends, series, every, cut, FC_S, FC_MIN_S))]
        if not stages:
            outcomes.not_exercised(f"each cut from a smaller window was followed by another (or the end of the "
                                   f"data) within {FC_MIN_S} s")
        first, cut, (srtt, t_end) = stages[0]
        t0 = cut.t_us
        lowered = cut.before * FC_BELOW

        def toward(w_max: float, t_us: float) -> float:
            return rfc.cubic_window((t_us - t0 + srtt) / 1e6, w_max, cut.after, mss)

        def bound(t_us: float) -> float:
            # Halfway to the unlowered curve (two datagrams at least): a stack's own
            # C, β or clock shifts its curve a little; a missing fast convergence
            # puts it on the other one.
            curve = toward(lowered, t_us)
            margin = max(2 * mss, (toward(cut.before, t_us) - curve) / 2)
            return max(curve, cut.after + ((t_us - t0) / srtt + 1) * mss) + margin

        unlowered = toward(cut.before, t_end)
        if unlowered <= bound(t_end) + 2 * mss:
            outcomes.not_exercised(f"a curve toward the second cut's own window ({cut.before} B) gives "
                                   f"{unlowered:.0f} B after {(t_end - t0) / 1e3:.0f} ms, within {2 * mss} B of "
                                   f"the bound {bound(t_end):.0f} B: no deviation could show")
        over = growth.worst_over(series, t0, t_end, bound)
        check(over is None, "above-lowered-curve", lambda: (
            f"{target.id}: after {first.describe()} the rate halved, and {cut.describe()} came from under "
            f"{FC_BELOW:.2f} of the first; {(over[0] - t0) / 1e3:.0f} ms after it the window was {over[1]} B, "
            f"above {bound(over[0]):.0f} B, the larger of W_cubic toward the lowered W_max {lowered:.0f} B and "
            f"W_est (smoothed RTT {srtt / 1e3:.1f} ms) plus half the way to the curve toward {cut.before} B, which gives "
            f"{unlowered:.0f} B by t={t_end / 1e6:.3f} s (RFC 9438 §4.7: fast convergence)"
        ), window=over[1] if over else 0, over_bound=over[1] / bound(over[0]) if over else 0.0)


#: What an undone cut's losses may be: RFC 9438 §4.9 undoes a congestion event found
#: spurious; reductions_with_cause names a cause "spurious" when every loss declared
#: for it was a packet the link delivered (reordered or delayed).
SPURIOUS = "spurious"


@example(schedule=strategies.rate_halved(BaseLink(rate_bps=40_000_000, rtt_us=80_000), 0, 1000))
@given(schedule=strategies.rate_halvings())
def test_cubic_undoes_a_cut_only_when_its_losses_were_spurious(longlook, target, schedule):
    """RFC 9438 §4.9.2: "Once the previously declared packet loss is confirmed to be
    spurious, CUBIC MAY restore the original values" of its state: an undo is for a
    congestion event whose losses were not losses. A cut the sender undid (the
    window back, in one update, to where the cut began: reductions.undone) must have
    had only spurious losses behind it: every packet declared lost for it delivered
    by the link (reductions_with_cause, joined by packet number through the
    decrypted capture). On rate_halvings every loss is a queue's real drop. Trigger:
    an undone cut."""
    if target.cc.family != "cubic":
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}): RFC 9438 §4.9's undo is CUBIC's")
    outcomes.require(target, "congestion_window")
    with outcomes.rare_trigger(), longlook.run(target, schedule, FC_PLAN, timeout_s=90) as obs:
        obs.completed()
        trace = obs.sender
        gone = sorted(undone(trace))
        if not gone:
            outcomes.not_exercised("the sender undid no cut")
        try:
            joined = join(obs.wire, obs.ground_truth)
        except Inconclusive:
            joined = None  # matched by time instead
        causes = reductions_with_cause(trace, obs.ground_truth, joined)
        real = [causes[i] for i in gone if causes[i].cause != SPURIOUS]
        check(not real, "undo-of-real-loss", lambda: (
            f"{target.id}: {len(real)} of {len(gone)} cut(s) undone although the link really dropped the packets "
            f"behind them; the first: {real[0].describe()}, then the window was restored in one update (RFC 9438 "
            f"§4.9.2: the original values MAY be restored once the loss is confirmed spurious)"
        ), undone=len(gone), real=len(real))


#: RFC 9438 §5.1: "C SHOULD be set to 0.4". The curve judged against is twice as
#: steep, its clock a whole (longest) round trip ahead: a stack's own clock, RTT or
#: fast convergence moves its curve a little; a constant far above 0.4 puts it above.
C_STEEPEST = 2 * rfc.CUBIC_C
#: Slow start, the first cut, then seconds of the curve on a deep queue.
C_PLAN = TransferPlan(sizes=(16_000_000,))
#: The curve after a cut is judged this long at most (s), and at least C_MIN_S of it.
C_S = 3.0
C_MIN_S = 1.0


@example(schedule=strategies.big_bdp_then_deep(BaseLink(rate_bps=40_000_000, rtt_us=80_000), 0, 1300))
@given(schedule=strategies.big_bdp_deepening())
def test_cubic_curve_is_no_steeper_than_its_constant(longlook, target, schedule):
    """RFC 9438 §5.1: "C SHOULD be set to 0.4" (with β_cubic 0.7 it keeps CUBIC as
    fair to Reno as intended). After a cut with nothing dropped for seconds (a queue
    deepened to eight BDPs), the window stays within the larger of the curve from the
    cut toward the window it began from with C_STEEPEST (t + the longest smoothed
    RTT) and W_est (α at most 1), plus two datagrams. Only a constant far above 0.4
    shows: the upper side of the rule. Trigger: a cut (not a collapse, not undone)
    followed by C_MIN_S with no other cut and data to send, long enough for the two
    curves (C and C_STEEPEST) to part by four datagrams."""
    if target.cc.family != "cubic":
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}): C is CUBIC's")
    outcomes.require(target, "congestion_window")
    outcomes.require(target, "smoothed_rtt")
    with outcomes.rare_trigger(), longlook.run(target, schedule, C_PLAN, timeout_s=90) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        every, cuts = growth.standing_cuts(trace, mss)
        series = [(t, c) for t, c, _, _ in analysis.cwnd_series(trace)]
        sends = analysis.ack_eliciting_sends(obs.wire)
        stage = next(((cut, stage) for cut in cuts
                      if (stage := growth.stage_after(trace, sends, series, every, cut, C_S, C_MIN_S))), None)
        if stage is None:
            outcomes.not_exercised(f"no cut followed by {C_MIN_S} s with no other cut and data to send")
        cut, (srtt, t_end) = stage
        t0 = cut.t_us
        longest = max(r for t, r in analysis.smoothed_rtt_us(trace) if t0 < t <= t_end)

        def bound(t_us: float) -> float:
            curve = rfc.cubic_window((t_us - t0 + longest) / 1e6, cut.before, cut.after, mss, c=C_STEEPEST)
            return max(curve, cut.after + ((t_us - t0) / srtt + 1) * mss) + 2 * mss

        at_c = rfc.cubic_window((t_end - t0 + longest) / 1e6, cut.before, cut.after, mss)
        steeper = rfc.cubic_window((t_end - t0 + longest) / 1e6, cut.before, cut.after, mss, c=C_STEEPEST)
        if steeper - at_c < 4 * mss:
            outcomes.not_exercised(f"{(t_end - t0) / 1e3:.0f} ms after {cut.describe()} the curves with C = "
                                   f"{rfc.CUBIC_C} and {C_STEEPEST} are within four datagrams")
        over = growth.worst_over(series, t0, t_end, bound)
        check(over is None, "curve-steeper-than-c", lambda: (
            f"{target.id}: {(over[0] - t0) / 1e3:.0f} ms after {cut.describe()} the window was {over[1]} B, above "
            f"{bound(over[0]):.0f} B: the curve toward {cut.before} B with C = {C_STEEPEST} (smoothed RTT up to "
            f"{longest / 1e3:.0f} ms) and W_est plus two datagrams; with C = {rfc.CUBIC_C} the curve gives "
            f"{at_c:.0f} B by t={t_end / 1e6:.3f} s (RFC 9438 §5.1: C SHOULD be 0.4)"
        ), window=over[1] if over else 0, over_bound=over[1] / bound(over[0]) if over else 0.0)


#: RFC 9438 §4.9.2's late detection: slow start and a cut on the shallow queue, the
#: deepening, the delayed datagram's spurious cut, the regrowth past it, its arrival
#: and acknowledgement, at 2-3 Mbit/s.
LATE_PLAN = TransferPlan(sizes=(1_000_000,))
#: Reductions with a congestion event behind them; any other as the acknowledgement
#: that proves the loss spurious comes in is the sender returning to what it saved.
CONGESTION = ("drop", "persistent_congestion", "ecn_ce")
#: How long after that acknowledgement reached the sender its log may show what it
#: did about it (µs; more where the stack's threads log further apart).
LATE_ACK_SLACK_US = 2_000


@example(schedule=strategies.late_spurious_loss(BaseLink(rate_bps=2_000_000, rtt_us=10_000), 0, 200, 120, 300))
@given(schedule=strategies.late_spurious_losses())
def test_cubic_keeps_its_window_when_a_loss_proves_spurious_late(longlook, target, schedule):
    """RFC 9438 §4.9.2: "when the detection happens long after a spurious loss event
    and the current cwnd is already higher than cwnd_prior, CUBIC SHOULD continue to
    use the current and the most recent values" (no undo back to them). One datagram
    is delayed for hundreds of milliseconds, so the sender declares it lost and cuts (a
    spurious cut: reductions_with_cause finds it delivered); the queue is deep by
    then, so the window regrows past where that cut began with nothing dropped. When
    the receiver's acknowledgement of it reaches the sender (the decrypted capture),
    the window may fall only for a congestion event (CONGESTION). Trigger: that
    spurious cut, the acknowledgement (a receiver may discard a packet that old
    instead, RFC 9000 §13.2.3), and a window then far enough above the cut's start
    (cwnd_prior) that returning to it would show as a reduction."""
    if target.cc.family != "cubic":
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}): RFC 9438 §4.9's undo is CUBIC's")
    outcomes.require(target, "congestion_window")
    # Whether the window has regrown past the cut when the acknowledgement comes, and
    # whether the receiver still takes a packet that old, depend on the stack: a rare trigger.
    with outcomes.rare_trigger(), longlook.run(target, schedule, LATE_PLAN, timeout_s=60) as obs:
        obs.completed()
        trace = obs.sender
        held = [r for r in obs.ground_truth.records
                if r.dir == "s2c" and r.fate == "delivered" and "extra_delay" in r.marks]
        if not held:
            outcomes.not_exercised("no delayed datagram was delivered")
        late = held[0]
        joined = join(obs.wire, obs.ground_truth)
        causes = reductions_with_cause(trace, obs.ground_truth, joined)
        cut = next((c.reduction for c in causes if c.cause == SPURIOUS and late.idx in {r.idx for r in c.records}),
                   None)
        if cut is None:
            outcomes.not_exercised(f"the sender cut no window for the delayed datagram (link idx {late.idx})")
        pns = {p.pn for p in joined.packets if p.idx == late.idx and p.space == "application"}
        t_ack = min((t for t, pn in analysis.wire_first_acks(obs.wire) if pn in pns), default=None)
        if t_ack is None:
            outcomes.not_exercised(f"the receiver never acknowledged the delayed packet (pn {sorted(pns)}, "
                                   f"{(late.dep_us - late.arr_us) / 1e3:.0f} ms late): discarded as too old, so no "
                                   f"sender could find its loss spurious")
        if t_ack <= cut.t_us:
            outcomes.not_exercised(f"the delayed packet (pn {sorted(pns)}) was acknowledged at t={t_ack / 1e6:.3f} s, "
                                   f"before the sender cut for it ({cut.describe()}): not a late detection")
        series = [(t, c) for t, c, _, _ in analysis.cwnd_series(trace)]
        at_ack = next((c for t, c in reversed(series) if t < t_ack), None)
        # Returning to cut.before from here would be a reduction (reductions.REDUCTION_FRACTION).
        visible = cut.before / (1 - REDUCTION_FRACTION)
        if at_ack is None or at_ack <= visible:
            outcomes.not_exercised(f"the acknowledgement of the delayed packet came at t={t_ack / 1e6:.3f} s with "
                                   f"the window at {at_ack} B, not above {visible:.0f} B: the {cut.before} B the "
                                   f"spurious cut ({cut.describe()}) began from is not far enough below to tell a "
                                   f"return to it")
        t_end = t_ack + analysis.log_order_slack_us(target, LATE_ACK_SLACK_US)
        back = [c for c in causes if t_ack <= c.reduction.t_us <= t_end and c.cause not in CONGESTION]
        check(not back, "late-undo", lambda: (
            f"{target.id}: {cut.describe()} was spurious (link idx {late.idx}, pn {sorted(pns)}, delayed "
            f"{(late.dep_us - late.arr_us) / 1e3:.0f} ms); when its acknowledgement came, at t={t_ack / 1e6:.3f} s, "
            f"the window stood at {at_ack} B, regrown past the {cut.before} B the cut began from; then "
            f"{back[0].describe()}, with no congestion event behind it (RFC 9438 §4.9.2: a spurious loss detected "
            f"after the window has regrown past cwnd_prior SHOULD leave the current values in place)"
        ), window_at_ack=at_ack, cwnd_prior=cut.before, fell_to=back[0].reduction.after if back else 0)
