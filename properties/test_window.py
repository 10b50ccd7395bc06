"""The congestion window's floor and its reductions on loss.

RFC 9002 §7.2 (kMinimumWindow), §7.3.2 (one reduction per recovery period; the
reduction factor; the cut when a period begins; growth again once it ends), RFC 9438
§4.6 (CUBIC's β and the flight-size variant; the cut made at once).
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from harness.observe.events import Metrics, PacketSent
from harness.run import Inconclusive
from harness.schedule import TransferPlan, strategies
from harness.schedule.strategies import QUIC, BaseLink
from harness.schedule.types import Action
from harness.verdict import analysis, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(1_000_000,))


def _sender(obs):
    obs.completed()
    trace = obs.sender
    # A run whose log holds no window (an own build through Docker or --impl-cmd
    # whose qlog lacks it) says nothing about the window: never a silent pass.
    if not analysis.cwnd_series(trace):
        outcomes.not_exercised("the sender's log holds no congestion window: not observable in this run")
    return trace


def _acked_since(obs, t_from_us: float, t_to_us: float) -> int:
    """Bytes newly acknowledged on the wire between the two times; 0 when the
    capture cannot be read (the step-based allowance alone then applies)."""
    try:
        return analysis.bytes_newly_acknowledged(obs.wire, t_from_us, t_to_us)
    except Inconclusive:
        return 0


def _unlogged_growth(obs, trace, series, t_us: float, logged_before_us: float | None = None) -> int:
    """How far the window may have grown, unlogged, by `t_us`: the ACK that brings a
    loss may first grow the window, and stacks log the window once per ACK or less
    often. The largest step of the ten logged before, or, where the capture is
    readable, the bytes the ACKs since the stack last logged its metrics (before
    `logged_before_us`, default `t_us`) newly acknowledged (slow start's most)."""
    steps = [b[1] - a[1] for a, b in zip(series, series[1:]) if b[0] < t_us][-10:]
    unlogged = max([d for d in steps if d > 0], default=0)
    bound = t_us if logged_before_us is None else logged_before_us
    logged = max((m.t_us for m in trace.of(Metrics) if m.t_us < bound), default=None)
    if logged is not None:
        unlogged = max(unlogged, _acked_since(obs, logged, t_us))
    return unlogged


#: Long enough that a blackhole drawn by long_blackholes() falls inside the transfer.
FLOOR_PLAN = TransferPlan(sizes=(2_000_000,))


@example(schedule=strategies.CLEAN_LINK)
@example(schedule=strategies.dark(BaseLink(), 0, 600, 1500))
@given(schedule=st.one_of(strategies.loss_only(), strategies.long_blackholes()))
def test_cwnd_never_below_minimum_window(longlook, target, schedule):
    """RFC 9002 §7.2: the window never falls below kMinimumWindow = 2 ×
    max_datagram_size, whatever the losses — also where it matters most, at the
    collapse after persistent congestion (§7.6.2)."""
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, FLOOR_PLAN) as obs:
        trace = _sender(obs)
        floor = 2 * analysis.max_datagram(trace)
        for t, cwnd, _, _ in analysis.cwnd_series(trace):
            check(cwnd >= floor, "below-minimum-window",
                  f"{target.id}: cwnd {cwnd} < kMinimumWindow {floor} at t={t / 1e6:.3f} s",
                  window_over_floor=cwnd / floor)


@example(schedule=strategies.CLEAN_LINK)
@given(schedule=strategies.loss_only())
def test_one_window_reduction_per_recovery_period(longlook, target, schedule):
    """RFC 9002 §7.3.2: a loss of a packet sent before the current recovery period
    started does not reduce the window again; only a packet sent after it may."""
    # §7.3.2's recovery period is the loss-based controllers' (BBR's window follows
    # its model: ProbeRTT and its estimates move it without any loss).
    if target.cc.family not in BETA:
        outcomes.not_applicable(f"{target.cc.name} is not loss-based: its window moves with its model, "
                                "not per recovery period")
    # Reductions are tied to the losses the stack declares: a stack whose qlog has
    # no packet_lost cannot be judged (decided here, never from one run's trace).
    outcomes.require(target, "packet_lost")
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, PLAN) as obs:
        trace = _sender(obs)
        sent = analysis.send_times(trace)
        declared = analysis.losses(trace)
        cuts = analysis.reductions(trace)
        # The trigger: a loss declared after a recovery period began, or a second cut.
        if len(cuts) < 2 and not (cuts and any(l.t_us > cuts[0].t_us for l in declared)):
            outcomes.not_exercised(f"{len(cuts)} window reduction(s) and no loss declared inside a recovery period")
        for first, second in zip(cuts, cuts[1:]):
            # Losses declared after the first cut, up to the second: at least one of
            # them must be of a packet sent after the first recovery period began.
            causes = [l for l in declared if first.t_us < l.t_us <= second.t_us]
            fresh = [l for l in causes if sent.get((l.space, l.pn), -1) > first.t_us]
            persistent = second.after <= 2 * analysis.max_datagram(trace)
            check(fresh or persistent, "second-reduction-in-period", (
                f"{target.id}: {second.describe()} although every loss declared since "
                f"{first.describe()} ({len(causes)} of them, e.g. pn "
                f"{[l.pn for l in causes[:5]]}) was of a packet sent before that recovery began"
            ), stale_losses=len(causes))


@example(schedule=strategies.CLEAN_LINK)
@given(schedule=strategies.loss_only())
def test_recovery_reduces_window_by_beta(longlook, target, schedule):
    """RFC 9002 §7.3.2 / RFC 9438 §4.6: entering recovery sets the window to β·cwnd
    (0.5 NewReno, 0.7 CUBIC), within one datagram, floored at kMinimumWindow.
    RFC 9438 §4.6 lets CUBIC use β·flight_size instead, so for CUBIC the new window
    may lie anywhere between β·(bytes in flight) and β·cwnd."""
    beta = BETA.get(target.cc.family)
    if beta is None:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no multiplicative decrease")
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, PLAN) as obs:
        trace = _sender(obs)
        mss = analysis.max_datagram(trace)
        floor = 2 * mss
        series = analysis.cwnd_series(trace)
        cuts = analysis.reductions(trace)
        if not cuts:
            outcomes.not_exercised("no window reduction in this run")
        # Every reduction is judged, not only the first: a controller right on its
        # first loss may still cut wrongly on its third.
        for n, cut in enumerate(cuts, 1):
            # The cut may start above the last logged window (_unlogged_growth).
            unlogged = _unlogged_growth(obs, trace, series, cut.t_us)
            high = max(beta * (cut.before + unlogged), floor) + mss
            low = max(beta * cut.before, floor) - mss
            if target.cc.family == "cubic" and cut.bytes_in_flight:
                low = min(low, max(beta * cut.bytes_in_flight, floor) - mss)
            ok = low <= cut.after <= high
            persistent = cut.after <= floor
            check(ok or persistent, "beta", (
                f"{target.id}: reduction {n} of {len(cuts)}, {cut.describe()}, is ×{cut.after / cut.before:.3f}; "
                f"β for {target.cc.family} is {beta} (expected {low:.0f}…{high:.0f}; "
                f"bytes in flight {cut.bytes_in_flight})"
            ), factor=cut.after / cut.before, reduction=n)


#: Stacks log a window change and the loss behind it microseconds apart, in either
#: order: one ACK's processing, µs (as in test_recovery_rules.py).
SAME_ACK_US = 1_000
#: A cut by less than this share is no reduction (harness/observe/reductions.py).
NO_REDUCTION = 1 - analysis.REDUCTION_FRACTION


@example(schedule=strategies.CLEAN_LINK)
@given(schedule=strategies.loss_only())
def test_window_falls_when_recovery_begins(longlook, target, schedule):
    """RFC 9438 §4.6: "the sender MUST reduce cwnd and ssthresh immediately upon
    entering loss recovery"; RFC 9002 §7.3.2: "On entering a recovery period, a sender
    MUST set the slow start threshold to half the value of the congestion window when
    loss is detected" (NewReno may then bring cwnd down gradually, PRR). At the declared
    loss that opens each recovery period (the loss of an ack-eliciting packet sent after
    the previous period began), the sender logs, within the same ACK's processing
    (±1 ms), a cut of more than 10% of the window it had: of cwnd for CUBIC, of cwnd or
    ssthresh for NewReno (kMinimumWindow floors it). A sender that logs nothing then is
    judged by the first window it logs after. The other properties judge how far a cut
    goes and that it happens before the period ends; a sender that holds its cut back
    until then passes them. Trigger: a recovery period opened while the window was above
    the floor."""
    family = target.cc.family
    if BETA.get(family) is None:
        outcomes.not_applicable(f"{target.cc.name} ({family}) has no multiplicative decrease")
    outcomes.require(target, "packet_lost")
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, PLAN) as obs:
        trace = _sender(obs)
        floor = 2 * analysis.max_datagram(trace)
        sent = {p.pn: p.t_us for p in trace.of(PacketSent) if p.space == "application"}
        # Only a packet in flight is a congestion signal (§7.3.2, B.8): stacks also
        # declare ACK-only packets lost.
        eliciting = {p.pn for d in obs.wire.datagrams if d.entered and d.direction == "s2c"
                     for p in d.packets if p.space == "application" and p.ack_eliciting}
        metrics = [m for m in trace.of(Metrics) if m.congestion_window is not None or m.ssthresh is not None]
        series = analysis.cwnd_series(trace)
        opened, late = 0, []
        start = None
        # The sender's first instant: a controller created then may take a packet sent
        # at that very time for one sent inside a recovery period (F30).
        first_send = min(sent.values(), default=None)
        for loss in sorted(analysis.losses(trace), key=lambda e: e.t_us):
            if loss.space != "application" or loss.pn not in eliciting or (
                    start is not None and sent.get(loss.pn, -1) <= start):
                continue
            start = loss.t_us
            before = next((m.congestion_window for m in reversed(metrics)
                           if m.t_us < start - SAME_ACK_US and m.congestion_window is not None), None)
            if before is None or before * NO_REDUCTION <= floor:
                continue  # no window logged yet, or one a cut could not bring lower
            opened += 1
            # Against the window the sender had when it processed the ACK: the one
            # logged before, plus what that ACK may have grown it by, unlogged.
            cut_to = NO_REDUCTION * (before + _unlogged_growth(obs, trace, series, start + SAME_ACK_US,
                                                                start - SAME_ACK_US))

            def cut(m) -> bool:
                values = [m.congestion_window] + ([m.ssthresh] if family == "newreno" else [])
                return any(v is not None and v <= cut_to for v in values)

            at_loss = [m for m in metrics if abs(m.t_us - start) <= SAME_ACK_US]
            if any(cut(m) for m in at_loss):
                continue
            at_loss = [m for m in at_loss if m.congestion_window is not None]
            # Nothing of the loss's processing shows the cut: the first window the
            # sender logs after it decides (none at all: the log ends unjudged).
            after = next((m for m in metrics if m.t_us > start + SAME_ACK_US and m.congestion_window is not None), None)
            if at_loss or (after is not None and not cut(after)):
                shown = next((m for m in metrics if m.t_us > start - SAME_ACK_US and cut(m)), None)
                late.append((loss.pn, start, before, (at_loss or [after])[-1], shown))
        if not opened:
            outcomes.not_exercised("no recovery period opened while the window was above its floor")
        first = late[0] if late else None
        check(not late, "reduction-not-immediate", lambda: (
            f"{target.id}: at {len(late)} of the {opened} losses that opened a recovery period the window was not "
            f"cut; first: the loss of pn {first[0]} at t={first[1] / 1e6:.4f} s with cwnd {first[2]} B, cwnd "
            f"{first[3].congestion_window} B (ssthresh {first[3].ssthresh}) logged at t={first[3].t_us / 1e6:.4f} s; "
            + (f"cut (cwnd {first[4].congestion_window} B, ssthresh {first[4].ssthresh}) only at "
               f"t={first[4].t_us / 1e6:.4f} s" if first[4] else "no cut of more than 10% logged after it")
        ), late=len(late),
            # Of those, the periods opened by a packet sent after the sender's first instant.
            late_after_first_send=sum(1 for pn, *_ in late if sent.get(pn) != first_send),
            # How long after the loss the first one's cut was logged (the run's end if never).
            delay_s=((first[4].t_us if first[4] else metrics[-1].t_us) - first[1]) / 1e6 if first else 0.0)


#: Round trips after a recovery period ends within which the window must have grown.
REGROWTH_RTTS = 4
GROWTH_PLAN = TransferPlan(sizes=(2_000_000,))


def _recovery_end(acks, after_us: float) -> float | None:
    """When the first acknowledgement of a packet sent after `after_us` reached the
    sender (wire clock): RFC 9002 §7.3.2's end of the recovery period begun then."""
    return next((a.t_us for a in acks if a.space == "application" and a.new_largest and a.sample_us is not None
                 and a.t_us - a.sample_us > after_us), None)


@example(schedule=BaseLink().schedule(0, actions=[Action("s2c", 300, "drop", flow=QUIC)]))
@given(schedule=strategies.loss_only())
def test_window_grows_again_after_recovery(longlook, target, schedule):
    """RFC 9002 §7.3.2: "A recovery period ends and the sender enters congestion
    avoidance when a packet sent during the recovery period is acknowledged"; §7.3.3
    then grows the window (RFC 9438 §4.2–4.4 for CUBIC). After each cut, once a packet
    sent after it is acknowledged (the capture's ACKs), the window logged within
    REGROWTH_RTTS round trips rises above the cut's value, unless another cut comes
    first; the rules about cuts alone do not see a sender stuck in recovery. Judged where the sender
    was using the window: its logged bytes in flight came within two datagrams of it
    (stacks that log none are given the benefit of a bulk transfer). Trigger: a cut whose
    period ended with that many round trips of the transfer left and no cut among them."""
    family = target.cc.family
    if BETA.get(family) is None:
        outcomes.not_applicable(f"{target.cc.name} ({family}) grows by its own model, not after recovery periods")
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, GROWTH_PLAN, timeout_s=60) as obs:
        trace = _sender(obs)
        mss = analysis.max_datagram(trace)
        acks = analysis.acks_received(obs.wire)
        last_send = max((d.t_us for d in obs.wire.datagrams if d.entered and d.direction == "s2c"
                         and any(p.space == "application" and p.ack_eliciting for p in d.packets)), default=0.0)
        cuts = analysis.reductions(trace)
        metrics = trace.of(Metrics)
        logs_inflight = any(m.bytes_in_flight is not None for m in metrics)
        base_rtt = 2 * (schedule.phases[0].s2c.delay_us or 0)
        judged, stuck = 0, []
        for i, c in enumerate(cuts):
            end = _recovery_end(acks, c.t_us)
            if end is None:
                continue
            rtt = next((m.smoothed_rtt_us for m in reversed(metrics) if m.t_us <= c.t_us and m.smoothed_rtt_us),
                       base_rtt) or base_rtt
            until = end + REGROWTH_RTTS * rtt
            if until > last_send or any(d.t_us <= until for d in cuts[i + 1:]):
                continue  # the transfer ended, or another cut came: this one's value is not the bar
            span = [m for m in metrics if end <= m.t_us <= until]
            if logs_inflight and not any(m.bytes_in_flight is not None and m.bytes_in_flight >= c.after - 2 * mss
                                         for m in span):
                continue  # not using its window: growth is not owed (§7.8)
            judged += 1
            peak = max((m.congestion_window for m in span if m.congestion_window is not None), default=c.after)
            if peak <= c.after:
                stuck.append((c, end, until, peak))
        if not judged:
            outcomes.not_exercised("no cut whose recovery period ended with the transfer still under way for "
                                   f"{REGROWTH_RTTS} round trips and no cut among them")
        first = stuck[0] if stuck else None
        check(not stuck, "no-growth-after-recovery", lambda: (
            f"{target.id}: after {len(stuck)} of {judged} cuts the window did not grow again; first: "
            f"{first[0].describe()}, its recovery period ended at t={first[1] / 1e6:.3f} s (a packet sent after the "
            f"cut acknowledged), and the window stayed at {first[3]} B or below until t={first[2] / 1e6:.3f} s, "
            f"{REGROWTH_RTTS} round trips later"
        ), stuck=len(stuck), judged=judged)
