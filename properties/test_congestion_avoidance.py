"""Congestion avoidance grows the window slowly.

RFC 9002 §7.3.3: in congestion avoidance a NewReno sender limits the increase of its
window to at most one max_datagram_size per congestion window acknowledged, about
one datagram per round trip. RFC 9438 §4.2: CUBIC's target window is clamped to at
most 1.5 × cwnd, so its window grows by at most half per round trip.

Congestion avoidance is every stretch from a window reduction to the next (§7.3.2
sets ssthresh to the reduced window, so slow start must not resume after a loss;
collapses to the minimum window, after which it does, excepted), plus what the stack
logs as congestion avoidance, or what is inferred as such from its window, ssthresh
and losses where it logs no states (harness.observe.states).
"""

from __future__ import annotations

import bisect

from hypothesis import example, given

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
