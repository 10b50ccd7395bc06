"""Congestion avoidance grows the window slowly, and CUBIC's no slower than Reno.

RFC 9002 §7.3.3: in congestion avoidance a NewReno sender limits the increase of its
window to at most one max_datagram_size per congestion window acknowledged, about
one datagram per round trip. RFC 9438 §4.2: CUBIC's target window is clamped to at
most 1.5 × cwnd, so its window grows by at most half per round trip.

Congestion avoidance is every stretch from a window reduction to the next (§7.3.2
sets ssthresh to the reduced window, so slow start must not resume after a loss;
collapses to the minimum window, after which it does, excepted), plus what the stack
logs as congestion avoidance, or what is inferred as such from its window, ssthresh
and losses where it logs no states (harness.observe.states).

RFC 9438 §4.3 bounds CUBIC's growth from below as well: in the Reno-friendly region
it follows W_est, Reno's window, which grows α_cubic ≈ 0.53 datagram per round trip.
"""

from __future__ import annotations

import bisect
from dataclasses import replace

from hypothesis import example, given
from hypothesis import strategies as st

from harness import rfc
from harness.observe.events import Metrics
from harness.schedule import Action, TransferPlan, strategies
from harness.schedule.strategies import BaseLink, QUIC
from harness.verdict import analysis, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(3_000_000,))
#: Growth allowed per smoothed RTT: NewReno one datagram, measured over windows of
#: one smoothed RTT, which may span the ACKs of a little more than one window: two.
NEWRENO_DATAGRAMS_PER_RTT = 2
#: CUBIC: the clamp is 1.5 × cwnd per RTT (RFC 9438 §4.2), plus a datagram.
CUBIC_GROWTH_PER_RTT = 0.5

#: One early loss, so most of the transfer is congestion avoidance.
ONE_EARLY_LOSS = BaseLink().schedule(seed=0, actions=[Action("s2c", 60, "drop", flow=QUIC)])


@example(schedule=ONE_EARLY_LOSS)
@given(schedule=strategies.loss_only())
def test_congestion_avoidance_growth_is_bounded(longlook, target, schedule):
    """Within congestion avoidance the window grows by at most one datagram per
    round trip (NewReno) or half the window per round trip (CUBIC)."""
    family = target.cc.family
    if family not in BETA:
        outcomes.not_applicable(f"{target.cc.name} ({family}) has no congestion avoidance rule here")
    outcomes.require(target, "smoothed_rtt")
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        rtts = analysis.smoothed_rtt_us(trace)
        check(rtts, "log-lacks-event", f"{target.id}: no smoothed RTT in the sender's qlog, which carries one "
              "(dialect capability)", event="smoothed_rtt")
        rtt_times = [t for t, _ in rtts]
        series = [(t, c) for t, c, _, _ in analysis.cwnd_series(trace)]
        times = [t for t, _ in series]
        avoidance = analysis.merged(analysis.intervals_in(trace, BETA[family], {"CongestionAvoidance"})
                                    + analysis.after_reductions(trace))
        # RFC 9438 §4.9 lets a sender undo a reduction it learns was spurious: a
        # return to the window some reduction started from is no growth.
        undo_to = [(cut.t_us, cut.before) for cut in analysis.reductions(trace)]
        for start, end in avoidance:
            lo, hi = bisect.bisect_left(times, start), bisect.bisect_left(times, end)
            inside = series[lo:hi]
            for i, (t0, c0) in enumerate(inside):
                srtt = rtts[max(bisect.bisect_right(rtt_times, t0) - 1, 0)][1]
                allowed = NEWRENO_DATAGRAMS_PER_RTT * mss if family == "newreno" else CUBIC_GROWTH_PER_RTT * c0 + mss
                for t1, c1 in inside[i + 1:]:
                    if t1 - t0 > srtt:
                        break
                    if any(t <= t1 and abs(c1 - before) <= mss for t, before in undo_to):
                        continue
                    check(c1 - c0 <= allowed, "avoidance-growth-too-fast", (
                        f"{target.id}: in congestion avoidance (from t={start / 1e6:.3f} s) the window grew "
                        f"{c0} → {c1} (+{c1 - c0} bytes, {(c1 - c0) / mss:.1f} datagrams) between "
                        f"t={t0 / 1e6:.3f} s and {t1 / 1e6:.3f} s, within one smoothed RTT ({srtt / 1e3:.1f} ms); "
                        f"{family} allows at most {allowed:.0f} bytes"
                    ), growth_over_allowed=(c1 - c0) / allowed)


#: RFC 9438 §4.2: two objects with a pause between them (its length drawn from
#: PAUSES_MS). The first is long enough for an early loss and a little congestion
#: avoidance.
IDLE_PLAN = TransferPlan(sizes=(400_000, 1_500_000), testcase="appidle")
#: The pauses, ms. The long one is longer than CUBIC's K at these windows (3-5 s), so a
#: curve whose clock ran through it stands at W_max. But a sender may restart its
#: window after an idle period (RFC 9002 §7.8 lets it, e.g. as RFC 7661 proposes; aioquic
#: restarts after 2 s from the send of its last acknowledged packet), and then no curve
#: goes on through the pause to judge. The short pause stays under such a threshold: the
#: curve keeps its epoch, and a clock that ran through the pause stands part of the
#: way to W_max (the property computes how far, and judges only where that shows).
PAUSES_MS = (1_500, 4_000)
#: A pause: the longest gap between the sender's ack-eliciting sends, at least this, µs.
IDLE_MIN_US = 1_000_000
#: Round trips after the pause in which the window is judged.
RESUME_RTTS = 4


def _one_early_drop(link: BaseLink, index: int):
    return link.schedule(seed=0, actions=[Action("s2c", index, "drop", flow=QUIC)])


@strategies.replayable
def one_early_drops():
    """One early loss on a drawn base link (a replay's the saved schedule)."""
    return st.builds(_one_early_drop, strategies.base_links, st.integers(min_value=40, max_value=120))


@example(schedule=ONE_EARLY_LOSS, pause_ms=PAUSES_MS[0])
@example(schedule=ONE_EARLY_LOSS, pause_ms=PAUSES_MS[1])
@given(schedule=one_early_drops(),
       pause_ms=strategies.replayed_plan_value("think_ms", st.sampled_from(PAUSES_MS)))
def test_cubic_clock_stops_while_application_limited(longlook, target, schedule, pause_ms):
    """RFC 9438 §4.2: "The elapsed time t ... MUST NOT include periods during which
    cwnd has not been updated due to application-limited behavior". After a pause
    with nothing to send, CUBIC's window resumes where its curve was when the pause
    began: within RESUME_RTTS round trips of the first send after it, the window
    stays within the larger of W_cubic and the Reno-friendly W_est at the active time
    of congestion avoidance (the reduction to the pause, plus those round trips and
    two more), and the window sending resumed with grown as W_est grows over those
    round trips (α_cubic a round trip), plus two datagrams. W_max is the
    window the reduction began from (fast convergence only lowers it). The pause is
    1.5 s or 4 s (PAUSES_MS: under and over the idle time after which a sender may
    restart its window). Trigger: a reduction before the pause, no restart when
    sending resumes, no other reduction until the judged round trips end, and a curve
    whose clock ran through the pause would stand more than two datagrams above that
    bound (else no deviation could show)."""
    if target.cc.family != "cubic":
        outcomes.not_applicable(f"a rule of CUBIC; {target.cc.name} is {target.cc.family}")
    outcomes.require(target, "congestion_window")
    outcomes.require(target, "smoothed_rtt")
    with outcomes.rare_trigger(), longlook.run(target, schedule, replace(IDLE_PLAN, think_ms=pause_ms)) as obs:
        obs.completed()
        trace, view = obs.sender, obs.wire
        mss = analysis.max_datagram(trace)
        sends = analysis.ack_eliciting_sends(view)
        gaps = [(b - a, a, b) for a, b in zip(sends, sends[1:])]
        length, idle_from, resumed = max(gaps, default=(0.0, 0.0, 0.0))
        if length < IDLE_MIN_US:
            outcomes.not_exercised(f"no pause in the sender's sends (longest gap {length / 1e3:.0f} ms)")
        cuts = analysis.reductions(trace)
        before = [c for c in cuts if c.t_us < idle_from]
        if not before:
            outcomes.not_exercised("no window reduction before the pause: the sender was not in congestion avoidance")
        cut = before[-1]
        rtts = analysis.smoothed_rtt_us(trace)
        srtt = next((s for t, s in reversed(rtts) if t <= idle_from), rtts[0][1] if rtts else 0.0)
        if srtt <= 0:
            outcomes.not_exercised("the sender logged no smoothed RTT before the pause")
        series = [(t, c) for t, c, _, _ in analysis.cwnd_series(trace)]
        # A sender that restarts its window after idle (RFC 9002 §7.8 lets it; aioquic
        # resets its whole controller, ssthresh included, though its qlog keeps the old
        # ssthresh) is in slow start afterwards: no curve continues through the pause.
        restart = next((c for c in cuts if idle_from <= c.t_us <= resumed + srtt), None)
        if restart is not None:
            outcomes.not_exercised(f"the window was cut when sending resumed ({restart.describe()}): a restart "
                                   "after idle, or another epoch")
        end = resumed + RESUME_RTTS * srtt
        if any(resumed < c.t_us <= end for c in cuts):
            outcomes.not_exercised("the window was reduced in the round trips after the pause: another epoch")
        at_resume = next((c for t, c in reversed(series) if t <= resumed), cut.after)
        beta = BETA["cubic"]
        active_s = (idle_from - cut.t_us + (RESUME_RTTS + 2) * srtt) / 1e6
        curve = rfc.cubic_window(active_s, cut.before, cut.after, mss)
        alpha = rfc.reno_friendly_alpha(beta)
        reno = cut.after + alpha * active_s * 1e6 / srtt * mss
        # A window that resumed above both curves (grown while the flight drained, say)
        # may still grow as W_est does from it in the judged round trips (§4.3).
        regrown = at_resume + alpha * RESUME_RTTS * mss
        bound = max(curve, reno, regrown) + 2 * mss
        # What a clock that ran through the pause would allow, clamped at 1.5 × cwnd.
        through = min(rfc.cubic_window(active_s + length / 1e6, cut.before, cut.after, mss),
                      1.5 * at_resume)
        if through <= bound + 2 * mss:
            outcomes.not_exercised(f"at these windows a clock through the pause would allow {through:.0f} B, "
                                   f"within {2 * mss} B of the bound {bound:.0f} B: no deviation could show")
        after = [(t, c) for t, c in series if resumed <= t <= end]
        if not after:
            outcomes.not_exercised("the sender logged no window in the round trips after the pause")
        t_max, c_max = max(after, key=lambda tc: tc[1])
        check(c_max <= bound, "cubic-clock-ran-while-idle", lambda: (
            f"{target.id}: the window reached {c_max} B at t={t_max / 1e6:.3f} s, "
            f"{(t_max - resumed) / 1e3:.0f} ms into congestion avoidance after a {length / 1e6:.2f} s pause with "
            f"nothing to send (t={idle_from / 1e6:.3f}-{resumed / 1e6:.3f} s); from the reduction "
            f"{cut.describe()} and {active_s:.2f} s of congestion avoidance W_cubic is {curve:.0f} B, W_est "
            f"{reno:.0f} B and the window it resumed with {at_resume} B (with W_est's growth since, {regrown:.0f} B), "
            f"so at most {bound:.0f} B; a clock that "
            f"ran through the pause gives {through:.0f} B"
        ), window=c_max, bound=bound, idle_s=length / 1e6, over_bound=c_max / bound)


#: RFC 9438 §4.3: α_cubic = 3 × (1 − β_cubic) / (1 + β_cubic), the Reno-friendly
#: region's growth in datagrams per round trip of a window-limited sender (≈ 0.53).
ALPHA_CUBIC = 3 * (1 - BETA["cubic"]) / (1 + BETA["cubic"])
#: The least share of that growth the stretches must show together: half, for round
#: trips and windows measured from the log. Without the region, CUBIC's curve grows by
#: under a tenth of a datagram per round trip for a second after a cut on these links.
MIN_SHARE_OF_RENO = 0.5
#: A stretch shorter than this many round trips (after the one its recovery takes) is
#: not measured: a cut's recovery and logging lag dominate it.
MIN_STRETCH_RTTS = 5
SMALL_BDP_PLAN = TransferPlan(sizes=(3_000_000,))


def window_full_at(trace, mss: int) -> list[float]:
    """Times the sender reported its flight within two datagrams of the window then in
    force: window-limited. Every report counts, not only the window's changes (those
    come where an ACK has just taken bytes out of flight)."""
    full, cwnd = [], None
    for m in trace.of(Metrics):
        cwnd = m.congestion_window if m.congestion_window is not None else cwnd
        if cwnd is not None and m.bytes_in_flight is not None and m.bytes_in_flight >= cwnd - 2 * mss:
            full.append(m.t_us)
    return full


def avoidance_stretches(trace, srtt_us: float, mss: int) -> list[tuple[float, float, float, int, int]]:
    """(start, end, round trips, window at start, highest window) of each stretch
    between two window cuts (the last: to the last window logged), starting one round
    trip after the first cut (its recovery period), at least MIN_STRETCH_RTTS long,
    in which the flight reached the window (less two datagrams) at least once: the
    sender was window-limited, so each round trip acknowledged about a window."""
    series = analysis.cwnd_series(trace)
    cuts = analysis.reductions(trace)
    end_of_series = series[-1][0] if series else 0.0
    full = window_full_at(trace, mss)
    out = []
    for cut, nxt in zip(cuts, [*cuts[1:], None]):
        start, end = cut.t_us + srtt_us, nxt.t_us if nxt else end_of_series
        rtts = (end - start) / srtt_us
        inside = [w for t, w, *_ in series if start <= t < end]
        if rtts < MIN_STRETCH_RTTS or not any(start <= t < end for t in full):
            continue
        w0 = next((w for t, w, *_ in reversed(series) if t <= start), cut.after)
        out.append((start, end, rtts, w0, max([w0, *inside])))
    return out


@given(schedule=strategies.small_bdp())
def test_cubic_grows_at_least_as_fast_as_reno_on_small_bdp_links(longlook, target, schedule):
    """RFC 9438 §4.3: when W_est (the window Reno would have, growing α_cubic ≈ 0.53
    datagram per round trip after a cut) exceeds W_cubic, "CUBIC is in the
    Reno-friendly region and cwnd SHOULD be set to W_est". On a link of small
    bandwidth-delay product and short round trip CUBIC's curve is nearly flat for
    seconds after each cut, so there the region decides the growth. Over the
    congestion avoidance stretches between cuts (avoidance_stretches), window-limited,
    the window grows together by at least MIN_SHARE_OF_RENO of α_cubic datagrams per
    smoothed round trip (the median the sender logged). Trigger: at least one such
    stretch."""
    if target.cc.family != "cubic":
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}): the Reno-friendly region is CUBIC's")
    outcomes.require(target, "congestion_window")
    outcomes.require(target, "smoothed_rtt")
    with longlook.run(target, schedule, SMALL_BDP_PLAN) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        srtts = sorted(r for _, r in analysis.smoothed_rtt_us(trace))
        if not srtts:
            outcomes.not_exercised("the sender logged no smoothed RTT in this run")
        srtt = srtts[len(srtts) // 2]
        stretches = avoidance_stretches(trace, srtt, mss)
        if not stretches:
            outcomes.not_exercised(f"no window-limited stretch of {MIN_STRETCH_RTTS} round trips between cuts")
        rtts = sum(s[2] for s in stretches)
        grown = sum(s[4] - s[3] for s in stretches)
        reno = ALPHA_CUBIC * rtts * mss
        check(grown >= MIN_SHARE_OF_RENO * reno, "slower-than-reno", lambda: (
            f"{target.id}: over {len(stretches)} congestion avoidance stretch(es) between cuts, {rtts:.0f} round "
            f"trips of {srtt / 1e3:.1f} ms in all, the window grew by {grown} B ({grown / mss:.1f} datagrams, "
            f"{grown / mss / rtts:.2f} per round trip); the Reno-friendly region grows α_cubic = {ALPHA_CUBIC:.2f} "
            f"per round trip ({reno / mss:.1f} datagrams), and at least half of that is required; the first "
            f"stretch: {stretches[0][3]} → {stretches[0][4]} B from t={stretches[0][0] / 1e6:.3f} s to "
            f"{stretches[0][1] / 1e6:.3f} s"
        ), per_rtt=grown / mss / rtts, stretches=len(stretches))


#: RFC 9438 §4.3: once W_est reaches cwnd_prior (the window when ssthresh was last
#: set), "the sender SHOULD set α_cubic to 1". The least growth per round trip that
#: tells α = 1 from α_cubic ≈ 0.53: halfway between them.
MIN_ALPHA_ONE = (1 + ALPHA_CUBIC) / 2
#: A stretch past cwnd_prior shorter than this many round trips is not measured.
MIN_PAST_PRIOR_RTTS = 10
#: A window held this many round trips or more without a change is a pause for some
#: other reason (flow control, a cap, too little data: ngtcp2 held 18 round trips in
#: one real-time run), not growth at some α: left out of the round trips counted. A
#: sender that grows a datagram less often than this has its stretch left out too,
#: and ends not exercised, never passed.
HELD_RTTS = 8


def past_prior_stretches(trace, mss: int) -> list[tuple[float, float, float, int, int, int]]:
    """(start, end, round trips, window at start, highest window, cwnd_prior) of each
    stretch from the first window above a cut's `before` (cwnd_prior) plus a datagram
    until the next cut or the last window logged, window-limited (the flight reached
    the window less two datagrams), with its round trips counted on the smoothed RTT
    logged at each moment (a deep queue lengthens them as the window grows), less the
    spells of HELD_RTTS or more in which the window did not change."""
    series = analysis.cwnd_series(trace)
    rtts = analysis.smoothed_rtt_us(trace)
    cuts = analysis.reductions(trace)
    if not series or not rtts:
        return []
    full = window_full_at(trace, mss)

    def srtt_at(t: float) -> float:
        return next((r for s, r in reversed(rtts) if s <= t), rtts[0][1])

    out = []
    for cut, nxt in zip(cuts, [*cuts[1:], None]):
        end = nxt.t_us if nxt else series[-1][0]
        inside = [(t, w) for t, w, *_ in series if cut.t_us < t < end]
        start = next(((t, w) for t, w in inside if w > cut.before + mss), None)
        if start is None or not any(start[0] <= t < end for t in full):
            continue
        points = [start[0]] + [t for t, _ in inside if t > start[0]] + [end]
        trips = sum(n for n in ((b - a) / srtt_at(a) for a, b in zip(points, points[1:])) if n < HELD_RTTS)
        if trips >= MIN_PAST_PRIOR_RTTS:
            out.append((start[0], end, trips, start[1], max(w for t, w in inside if t >= start[0]), cut.before))
    return out


@example(schedule=strategies.small_bdp_then_deep(BaseLink(rate_bps=10_000_000, rtt_us=20_000), 0, 500))
@given(schedule=strategies.small_bdp_deepening())
def test_cubic_grows_a_datagram_per_round_trip_past_its_prior_window(longlook, target, schedule):
    """RFC 9438 §4.3: in the Reno-friendly region W_est grows α_cubic ≈ 0.53 datagram
    per round trip, and "Once W_est has grown to reach the cwnd at the time of most
    recently setting ssthresh -- that is, W_est >= cwnd_prior -- the sender SHOULD set
    α_cubic to 1". On a link of small bandwidth-delay product (CUBIC's curve nearly
    flat for seconds) whose queue deepens after slow start's overflow, the window
    regrows past the one it was cut from with nothing dropped: over the window-limited
    stretch past cwnd_prior (past_prior_stretches), it must grow at least
    MIN_ALPHA_ONE datagrams per smoothed round trip. Trigger: such a stretch of
    MIN_PAST_PRIOR_RTTS round trips."""
    if target.cc.family != "cubic":
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}): α_cubic is CUBIC's")
    outcomes.require(target, "congestion_window")
    outcomes.require(target, "smoothed_rtt")
    with longlook.run(target, schedule, SMALL_BDP_PLAN) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        stretches = past_prior_stretches(trace, mss)
        if not stretches:
            outcomes.not_exercised(f"no window-limited stretch of {MIN_PAST_PRIOR_RTTS} round trips past the "
                                   "window of the cut before it")
        start, end, trips, w0, top, prior = max(stretches, key=lambda s: s[2])
        per_rtt = (top - w0) / mss / trips
        check(per_rtt >= MIN_ALPHA_ONE, "alpha-not-one-past-prior", lambda: (
            f"{target.id}: past cwnd_prior ({prior} B, the window of the cut before) the window grew {w0} → {top} B "
            f"from t={start / 1e6:.3f} s to {end / 1e6:.3f} s, {trips:.0f} round trips: {per_rtt:.2f} datagram "
            f"per round trip; with α_cubic = 1 (RFC 9438 §4.3, SHOULD once W_est ≥ cwnd_prior) the Reno-friendly "
            f"region grows 1, with {ALPHA_CUBIC:.2f} it grows that; at least {MIN_ALPHA_ONE:.2f} is required"
        ), per_rtt=per_rtt)

