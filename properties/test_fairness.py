"""A QUIC flow takes no more than its fair share from competing TCP flows.

Kakhki et al. (IMC'17 §4.2, Table 4) put Chromium's QUIC against 1, 2 and 4 kernel
TCP CUBIC flows on a 5 Mbit/s, 36 ms RTT bottleneck with a 30 KB buffer: QUIC took
far more than its share, largely because its CUBIC emulated two TCP flows (N = 2).
RFC 9002 §7 and RFC 9438 §1 ask for a controller that is "fair" to TCP's: the QUIC
flow's share of the bottleneck stays at most SHARE_BOUND × its fair share 1/(n+1).

The verdict uses repetitions (`repetitions()`: ci and dev 3, release 10): with 7 or
more runs a one-sided exact sign test (H0: the median ratio is at most SHARE_BOUND;
fail when p < 0.01); with fewer, too few for that test to reach p < 0.01, every run
must exceed the bound to fail (one run against a 30 KB buffer can land at ×1.6 by
chance; three in a row rarely do), so the first run within the bound ends the case.
Taking less than the fair share is reported, not failed.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from harness.run import Inconclusive
from harness.schedule import LinkSettings, Schedule, TransferPlan, strategies
from harness.verdict import analysis
from harness.verdict.profiles import PROFILE, repetitions, slow
from harness.verdict.deviation import check

#: At most this many times the fair share (the issue's starting point).
SHARE_BOUND = 1.5
ALPHA = 0.01
#: The QUIC transfer: at a fair 1 Mbit/s (four TCP flows) it lasts about 16 s.
SIZE = 2_000_000
#: Kakhki et al.'s bottleneck: 5 Mbit/s, 36 ms RTT, 30 KB drop-tail buffer.
KAKHKI = Schedule.constant(0, LinkSettings(rate_bps=5_000_000, delay_us=18_000, queue_bytes=30_000))


def beyond(values: list[float], bound: float) -> tuple[bool, float]:
    """(whether the runs show values above `bound`, the sign test's p): by the sign
    test with 7 or more runs, else only when every run is above it."""
    p = analysis.sign_test_p(values, bound)
    return (p < ALPHA if len(values) >= 7 else all(v > bound for v in values)), p


def decided(values: list[float], bound: float, runs: int) -> bool:
    """Whether the verdict is settled before all `runs` are made: below 7 runs a
    single run within the bound already decides "not beyond" (every run must exceed
    it to fail), so the gate need not pay for the others."""
    return len(values) >= runs or (runs < 7 and any(v <= bound for v in values))


def against_tcp(schedule: Schedule, flows: int, rep: int) -> tuple[TransferPlan, float]:
    """Repetition `rep` of the transfer against `flows` TCP CUBIC flows, and its time
    bound: three times as long as the transfer takes at its fair share."""
    rate = schedule.phases[0].s2c.rate_bps
    plan = TransferPlan(sizes=(SIZE,), tcp_flows=flows, tcp_cc="cubic", seed=rep)
    return plan, SIZE * 8 / (rate / (flows + 1)) * 3 + 20


class UnderShare(UserWarning):
    """The QUIC flow took less than its fair share: reported, not a failure."""


bottlenecks = strategies.replayable(lambda: st.builds(
    lambda rate, rtt_ms, buffer, seed: Schedule.constant(
        seed, LinkSettings(rate_bps=rate, delay_us=rtt_ms * 500, queue_bytes=buffer)),
    st.sampled_from([5_000_000, 10_000_000]), st.sampled_from([36, 20, 80]),
    st.sampled_from([30_000, 60_000, 120_000]), strategies.seeds,
))()


#: Competing TCP flows per case. Against 2 or 4 flows a stack can sit right at the
#: bound (aioquic NewReno: ×1.58–1.97 against 4, once below ×1.5), where three runs
#: decide nothing reliably, so the ci profile keeps the single-flow case; dev and
#: release add 2 and 4 (release with the sign test over 10 runs).
FLOWS = [1] if PROFILE == "ci" else [1, 2, 4]


@pytest.mark.real_time_only("competing kernel TCP CUBIC flows (iperf3)")
@slow
@pytest.mark.parametrize("flows", FLOWS)
@example(schedule=KAKHKI)
@given(schedule=bottlenecks)
def test_fair_share_against_tcp_cubic(longlook, target, flows, schedule):
    """Against n kernel TCP CUBIC flows, the QUIC flow's share of the bottleneck is
    at most SHARE_BOUND / (n + 1)."""
    fair = 1 / (flows + 1)
    runs = repetitions()
    ratios: list[float] = []
    with longlook.together():  # a failed verdict keeps every run behind it
        for rep in range(runs):
            plan, timeout_s = against_tcp(schedule, flows, rep)
            with longlook.run(target, schedule, plan, timeout_s=timeout_s) as obs:
                obs.completed()
                busy = obs.result.saturated()
                if busy:
                    raise Inconclusive(f"{busy}: endpoint-bound, not link-bound")
                share, t0, t1 = obs.transfer_share()
                ratios.append(share / fair)
                if decided(ratios, SHARE_BOUND, runs):
                    break
        listing = ", ".join(f"{r:.2f}" for r in ratios)
        over, p = beyond(ratios, SHARE_BOUND)
        check(not over, "unfair-against-tcp", (
            f"{target.id}: against {flows} TCP CUBIC flow(s) the QUIC flow took ×[{listing}] its fair "
            f"share of {fair:.0%} in {len(ratios)} run(s) (last: {share:.0%} of the bottleneck from "
            f"t={t0 / 1e6:.1f} s to {t1 / 1e6:.1f} s); at most ×{SHARE_BOUND} "
            + (f"(sign test p = {p:.4f} < {ALPHA})" if runs >= 7 else "in every run")
        ), share_ratio=max(ratios))
        if max(ratios) < 1.0:
            warnings.warn(UnderShare(
                f"{target.id}: against {flows} TCP flow(s) the QUIC flow took only ×[{listing}] its fair share"))


#: Jain's fairness index two flows of one stack and controller must reach (1 is an
#: even split; 0.9 allows about a 63/37 split of the bottleneck).
JAIN_BOUND = 0.9


@slow
@pytest.mark.plans(quic_flows=2)
@example(schedule=KAKHKI)
@given(schedule=bottlenecks)
def test_quic_flows_share_fairly(longlook, target, schedule):
    """Two QUIC connections of the same stack and controller, started together on
    the same bottleneck, share it with Jain's index ≥ JAIN_BOUND (RFC 9002 §7: a
    controller fair to TCP's is fair to itself; Kakhki et al. §4.2)."""
    rate = schedule.phases[0].s2c.rate_bps
    runs = repetitions()
    unfairness: list[float] = []  # 1 − Jain's index per run: above 1 − JAIN_BOUND is unfair
    with longlook.together():  # a failed verdict keeps every run behind it
        for rep in range(runs):
            plan = TransferPlan(sizes=(SIZE,), quic_flows=2, seed=rep)
            with longlook.run(target, schedule, plan, timeout_s=SIZE * 8 / rate * 2 * 3 + 20) as obs:
                obs.completed()
                busy = obs.result.saturated()
                if busy:
                    raise Inconclusive(f"{busy}: endpoint-bound, not link-bound")
                shares, t0, t1 = analysis.flow_bytes_while_all_active(obs.transfer_records())
                check(len(shares) == 2, "flows-missing",
                      f"{target.id}: {len(shares)} flows of the transfer in the ground truth, 2 expected")
                check(t1 > t0, "never-together",
                      f"{target.id}: the two connections were never active together after their first second")
                unfairness.append(1 - analysis.jain(list(shares.values())))
                if decided(unfairness, 1 - JAIN_BOUND, runs):
                    break
        over, p = beyond(unfairness, 1 - JAIN_BOUND)
        split = ", ".join(f"{b / sum(shares.values()):.0%}" for b in shares.values())
        listing = ", ".join(f"{1 - u:.3f}" for u in unfairness)
        check(not over, "unfair-between-connections", (
            f"{target.id}: two connections of one stack reached Jain's index [{listing}] in {len(unfairness)} run(s) "
            f"(< {JAIN_BOUND} " + (f"by the sign test, p = {p:.4f}" if runs >= 7 else "in every run")
            + f"); last split {split} from t={t0 / 1e6:.1f} s to {t1 / 1e6:.1f} s"
        ), jain=1 - max(unfairness))
