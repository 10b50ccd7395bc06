"""No window growth while application-limited.

RFC 9002 §7.8: when bytes in flight is smaller than the congestion window and
sending is not pacing limited, the window is under-utilised and SHOULD NOT be
increased in either slow start or congestion avoidance.

The client fetches small objects one after another with a pause between them, so
the sender never has more than one small object in flight. A window that grows
anyway (Kakhki et al. saw Chromium's QUIC do so) lets the sender burst far beyond
what the path has shown it can carry once the application has more to send.
"""

from __future__ import annotations

from hypothesis import example, given

from harness.schedule import TransferPlan, strategies
from harness.verdict import analysis, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.deviation import check

#: 40 objects of 3000 bytes (three datagrams), 20 ms apart.
PLAN = TransferPlan(sizes=(3_000,) * 40, testcase="appidle", think_ms=20)
#: RFC 9002 says any window above bytes in flight is under-used; growth is accepted
#: while at least this fraction of the window was in flight (in slow start a sender
#: that sends at its window has half of it in flight when the first ACKs return).
UTILISED_FRACTION = 0.5


@example(schedule=strategies.CLEAN_LINK)
@given(schedule=strategies.loss_only())
def test_no_window_growth_while_application_limited(longlook, target, schedule):
    """Every increase of the window follows a time when at least half of the
    previous window was in flight."""
    if target.cc.family not in BETA:
        # §7.8 names slow start and congestion avoidance, and lets other controllers
        # use an alternative: BBR bounds its window by its own model (cwnd_gain·BDP),
        # which the BBR properties judge (shared/reference/bbr.md §1.6).
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no slow start or congestion "
                                f"avoidance for RFC 9002 §7.8 to restrain")
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace = obs.sender
        series = analysis.inflight_between_window_changes(trace)
        for (t, before, after, peak) in series:
            if after <= before:
                continue
            check(peak is not None and peak >= UTILISED_FRACTION * before, "growth-while-app-limited", (
                f"{target.id}: cwnd grew {before} → {after} at t={t / 1e6:.3f} s while at most "
                f"{peak} bytes were in flight since the window was last set "
                f"(< {UTILISED_FRACTION:.0%} of it): the sender was application-limited "
                f"({len(PLAN.sizes)} objects of {PLAN.sizes[0]} bytes, {PLAN.think_ms} ms apart)"
            ), growth_bytes=after - before, inflight_share=(peak or 0) / before)
