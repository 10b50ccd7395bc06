"""A QUIC flow takes no more than its fair share from competing TCP flows.

Kakhki et al. (IMC'17 §4.2, Table 4) put Chromium's QUIC against 1, 2 and 4 kernel
TCP CUBIC flows on a 5 Mbit/s, 36 ms RTT bottleneck with a 30 KB buffer: QUIC took
far more than its share, largely because its CUBIC emulated two TCP flows (N = 2).
RFC 9002 §7 and RFC 9438 §1 ask for a controller that is "fair" to TCP's: the QUIC
flow's share of the bottleneck stays at most SHARE_BOUND × its fair share 1/(n+1).

The verdict uses repetitions: under the release profile 10 runs and a one-sided
exact sign test (H0: the median ratio is at most SHARE_BOUND; fail when p < 0.01);
with fewer runs than the test needs to reach p < 0.01 (ci: one run), every run must
exceed the bound to fail. Taking less than the fair share is reported, not failed.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from harness import strategies
from harness.pytest_plugin import PROFILE, repetitions, slow
from harness.runner import Inconclusive
from harness.schedule import LinkSettings, Schedule
from harness.topology import TransferPlan
from properties import analysis

#: At most this many times the fair share (the issue's starting point).
SHARE_BOUND = 1.5
ALPHA = 0.01
#: The QUIC transfer: at a fair 1 Mbit/s (four TCP flows) it lasts about 16 s.
SIZE = 2_000_000
#: Kakhki et al.'s bottleneck: 5 Mbit/s, 36 ms RTT, 30 KB drop-tail buffer.
KAKHKI = Schedule.constant(0, LinkSettings(rate_bps=5_000_000, delay_us=18_000, queue_bytes=30_000))


class UnderShare(UserWarning):
    """The QUIC flow took less than its fair share: reported, not a failure."""


bottlenecks = strategies.replayable(lambda: st.builds(
    lambda rate, rtt_ms, buffer, seed: Schedule.constant(
        seed, LinkSettings(rate_bps=rate, delay_us=rtt_ms * 500, queue_bytes=buffer)),
    st.sampled_from([5_000_000, 10_000_000]), st.sampled_from([36, 20, 80]),
    st.sampled_from([30_000, 60_000, 120_000]), strategies.seeds,
))()


#: Competing TCP flows per case. One run against 2 or 4 flows is too noisy for a
#: verdict at ×1.5 (runs of one stack spread by ±0.2 there), so the ci profile keeps
#: the single-flow case; dev and release add 2 and 4 with repetitions.
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
    for rep in range(runs):
        plan = TransferPlan(sizes=(SIZE,), tcp_flows=flows, tcp_cc="cubic", seed=rep)
        rate = schedule.phases[0].s2c.rate_bps
        with longlook.run(target, schedule, plan, timeout_s=SIZE * 8 / rate / fair * 3 + 20) as obs:
            assert obs.result.ok, f"{target.id}: transfer failed: {obs.result.reason}"
            busy = obs.result.saturated()
            if busy:
                raise Inconclusive(f"{busy}: endpoint-bound, not link-bound")
            share, t0, t1 = analysis.transfer_share(obs.ground_truth.records)
            ratios.append(share / fair)
            if rep < runs - 1:
                continue
            listing = ", ".join(f"{r:.2f}" for r in ratios)
            p = analysis.sign_test_p(ratios, SHARE_BOUND)
            over = p < ALPHA if runs >= 7 else all(r > SHARE_BOUND for r in ratios)
            assert not over, (
                f"{target.id}: against {flows} TCP CUBIC flow(s) the QUIC flow took ×[{listing}] its fair "
                f"share of {fair:.0%} in {runs} run(s) (last: {share:.0%} of the bottleneck from "
                f"t={t0 / 1e6:.1f} s to {t1 / 1e6:.1f} s); at most ×{SHARE_BOUND} "
                + (f"(sign test p = {p:.4f} < {ALPHA})" if runs >= 7 else "in every run")
            )
            if max(ratios) < 1.0:
                warnings.warn(UnderShare(
                    f"{target.id}: against {flows} TCP flow(s) the QUIC flow took only ×[{listing}] its fair share"))


#: Jain's fairness index two flows of one stack and controller must reach (1 is an
#: even split; 0.9 allows about a 63/37 split of the bottleneck).
JAIN_BOUND = 0.9


@slow
@example(schedule=KAKHKI)
@given(schedule=bottlenecks)
def test_quic_flows_share_fairly(longlook, target, schedule):
    """Two QUIC connections of the same stack and controller, started together on
    the same bottleneck, share it with Jain's index ≥ JAIN_BOUND (RFC 9002 §7: a
    controller fair to TCP's is fair to itself; Kakhki et al. §4.2)."""
    rate = schedule.phases[0].s2c.rate_bps
    plan = TransferPlan(sizes=(SIZE,), quic_flows=2)
    with longlook.run(target, schedule, plan, timeout_s=SIZE * 8 / rate * 2 * 3 + 20) as obs:
        assert obs.result.ok, f"{target.id}: transfer failed: {obs.result.reason}"
        busy = obs.result.saturated()
        if busy:
            raise Inconclusive(f"{busy}: endpoint-bound, not link-bound")
        shares, t0, t1 = analysis.flow_bytes_while_all_active(analysis.transfer_records(obs.ground_truth.records))
        assert len(shares) == 2, f"{target.id}: {len(shares)} flows of the transfer in the ground truth, 2 expected"
        index = analysis.jain(list(shares.values()))
        split = ", ".join(f"{b / sum(shares.values()):.0%}" for b in shares.values())
        assert index >= JAIN_BOUND, (
            f"{target.id}: two connections split the bottleneck {split} from t={t0 / 1e6:.1f} s to "
            f"{t1 / 1e6:.1f} s: Jain's index {index:.3f} < {JAIN_BOUND}"
        )
