"""The congestion window's floor and its reductions on loss.

RFC 9002 §7.2 (kMinimumWindow), §7.3.2 (one reduction per recovery period; the
reduction factor), RFC 9438 §4.6 (CUBIC's β and the flight-size variant).
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from harness.observe.events import Metrics
from harness.run import Inconclusive
from harness.schedule import TransferPlan, strategies
from harness.schedule.strategies import BaseLink
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


#: Long enough that a blackhole drawn by long_blackholes() falls inside the transfer.
FLOOR_PLAN = TransferPlan(sizes=(2_000_000,))


@example(schedule=strategies.CLEAN_LINK)
@example(schedule=strategies.dark(BaseLink(), 0, 600, 1500))
@given(schedule=st.one_of(strategies.loss_only(), strategies.long_blackholes()))
def test_cwnd_never_below_minimum_window(longlook, target, schedule):
    """RFC 9002 §7.2: the window never falls below kMinimumWindow = 2 ×
    max_datagram_size, whatever the losses — also where it matters most, at the
    collapse after persistent congestion (§7.6.2)."""
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
            # The ACK that brings the loss may first grow the window, and stacks log
            # the window once per ACK or less often: the cut may start above the last
            # logged value by up to one ACK's growth (the largest step of the ten
            # before it) or, where the capture is readable, by the bytes the ACKs
            # since the stack last logged its metrics newly acknowledged (slow
            # start's most).
            steps = [b[1] - a[1] for a, b in zip(series, series[1:]) if b[0] < cut.t_us][-10:]
            unlogged = max([d for d in steps if d > 0], default=0)
            logged = max((m.t_us for m in trace.of(Metrics) if m.t_us < cut.t_us), default=None)
            if logged is not None:
                unlogged = max(unlogged, _acked_since(obs, logged, cut.t_us))
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
