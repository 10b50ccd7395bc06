"""BBR judged from outside: what draft-ietf-ccwg-bbr (v3) and BBRv1 stacks promise,
read from the emulator's ground truth (the bottleneck queue at each arrival, the
departures of the flow), for controllers of the bbr family only.

- A model-based sender keeps the bottleneck queue small on a clean path, whatever
  the buffer: its window is a gain (2, 2.25 while probing) times its estimate of
  the BDP, so in steady state the queue stays within about one BDP, where a
  loss-based sender fills a deep buffer until it overflows. (draft §ProbeBW cwnd
  gain; Cardwell et al. 2016: "BBR keeps the queue near empty").
- ProbeRTT: the draft's flows MUST use ProbeRTTInterval = 5 s; BBRv1 (Linux, quinn,
  picoquic bbr1) uses 10 s. A min_rtt not refreshed for that long (no RTT sample at
  the path's minimum) makes the sender drain its flight for 200 ms, so on a long
  transfer the flow meets an empty bottleneck queue at least once per period.
- Loss tolerance: BBRv2/v3 react to loss only above 2% per round (quiche: 1.5%) and
  BBRv1 not at all, so light random loss (≤ 1%) leaves at least half the link used,
  where a loss-based sender, halving its window at every loss, cannot hold that much.

Bounds are the draft's constants with the slack named at each; the stack's variant
(v1 or v3) is not assumed, so each bound is the more lenient of the two.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from harness.run import Inconclusive
from harness.schedule import IidLoss, TransferPlan
from harness.schedule.strategies import BaseLink, replayable
from harness.verdict import outcomes
from harness.verdict.deviation import check
from harness.verdict.profiles import slow

#: A deep buffer: a loss-based sender fills it, BBR should not.
DEEP_QUEUE_BDP = 8.0
#: Steady-state queue, in BDPs: ProbeBW's cwnd gain 2 (2.25 while probing up) allows
#: one BDP queued (1.25 while probing), and a sender limited by that window sits
#: there (BBRv1's known standing queue); the median must stay within 1.25 BDPs, the
#: 90th percentile within 1.5 (ACK aggregation adds to it for a round at a time).
QUEUE_MEDIAN_BDP, QUEUE_P90_BDP = 1.25, 1.5
#: The longest ProbeRTT period any BBR uses (v1: 10 s; the draft's MUST is 5 s),
#: plus its 200 ms duration and slack for timer granularity.
PROBE_RTT_PERIOD_S = 10.0 + 0.2 + 0.8
#: A queue this small (two datagrams) is empty for an RTT sample: what a datagram
#: meets right after a ProbeRTT drained the flight.
EMPTY_QUEUE = 3_000
#: Light random loss keeps the link at least this busy in the transfer's second half.
#: Half the link: above what any loss-based sender can hold at 0.2-1% loss (Mathis
#: et al.: at most 1.22/√p datagrams per round trip, 18-41% of this link's BDP), and
#: below full use, as v2/v3's threshold is per round: at 1% iid loss about one round
#: in seven loses more than 2% of a 67-datagram flight by chance, and each such
#: round cuts the model by β = 0.7 (picoquic's bbr, BBRv3, held 64% in real time).
LOSSY_UTILISATION = 0.50


def _departures(obs) -> list[tuple[float, int, int]]:
    """(departure µs, size, queue bytes at arrival) of the transfer's delivered
    datagrams, in departure order, up to its last full-size datagram (what follows,
    the last ACKs and a closing packet, is not the transfer using the link)."""
    out = sorted((r.dep_us, r.size, r.qbytes) for r in obs.transfer_records() if r.dep_us is not None)
    if len(out) < 100:
        outcomes.not_exercised(f"the ground truth holds only {len(out)} delivered datagrams of the transfer")
    largest = max(size for _, size, _ in out)
    return out[:max(i for i, (_, size, _) in enumerate(out) if size >= largest // 2) + 1]


def _second_half(out: list[tuple[float, int, int]]) -> list[tuple[float, int, int]]:
    """The datagrams after half the transfer's bytes: Startup and Drain are over."""
    total, acc = sum(size for _, size, _ in out), 0
    for i, (_, size, _) in enumerate(out):
        acc += size
        if acc >= total / 2:
            return out[i:]
    return out


def _bbr_only(target) -> None:
    if target.cc.family != "bbr":
        outcomes.not_applicable(f"a rule of the bbr family; {target.cc.name} is {target.cc.family}")


def _link_bound(obs) -> None:
    busy = obs.result.saturated()
    if busy:
        raise Inconclusive(f"{busy}: endpoint-bound, not link-bound")


def _base(schedule) -> BaseLink:
    s2c = schedule.phases[0].s2c
    return BaseLink(rate_bps=s2c.rate_bps, rtt_us=2 * s2c.delay_us)


deep_links = replayable(lambda: st.builds(
    BaseLink, rate_bps=st.sampled_from([10_000_000, 20_000_000]), rtt_us=st.sampled_from([20_000, 40_000, 80_000]),
).map(lambda b: b.schedule(seed=0, queue_bdp=DEEP_QUEUE_BDP)))()


@example(schedule=BaseLink().schedule(seed=0, queue_bdp=DEEP_QUEUE_BDP))
@example(schedule=BaseLink(rate_bps=10_000_000, rtt_us=80_000).schedule(seed=0, queue_bdp=DEEP_QUEUE_BDP))
@given(schedule=deep_links)
def test_bbr_keeps_the_queue_small_on_a_clean_link(longlook, target, schedule):
    """On a clean link with an 8-BDP buffer, in the transfer's second half, the
    bottleneck queue the flow meets has a median within 1 BDP and a 90th percentile
    within 1.5 BDPs. Trigger: a transfer of at least 100 delivered datagrams."""
    _bbr_only(target)
    base = _base(schedule)
    plan = TransferPlan(sizes=(max(60 * base.bdp_bytes, 3_000_000),))
    with longlook.run(target, schedule, plan) as obs:
        obs.completed()
        _link_bound(obs)
        queues = sorted(q / base.bdp_bytes for _, _, q in _second_half(_departures(obs)))
        median, p90 = queues[len(queues) // 2], queues[int(0.9 * (len(queues) - 1))]
        check(median <= QUEUE_MEDIAN_BDP and p90 <= QUEUE_P90_BDP, "standing-queue", (
            f"{target.id}: in the second half of a {plan.sizes[0] / 1e6:.1f} MB transfer on a clean "
            f"{base.rate_bps / 1e6:.0f} Mbit/s, {base.rtt_us / 1e3:.0f} ms link with an {DEEP_QUEUE_BDP:.0f}-BDP "
            f"buffer, the queue its datagrams met was {median:.2f} BDP at the median and {p90:.2f} at the 90th "
            f"percentile (at most {QUEUE_MEDIAN_BDP} and {QUEUE_P90_BDP}): a model-based sender's window of "
            f"2-2.25 BDPs queues at most 1.25"), median_bdp=median, p90_bdp=p90)


def refreshes(out: list[tuple[float, int, int]]) -> list[float]:
    """Times (µs) at which a datagram of the flow met a queue of at most EMPTY_QUEUE
    bytes: its RTT sample was at the path's minimum, which refreshes BBR's min_rtt
    (and its ProbeRTT timer) as a ProbeRTT would."""
    return [t for t, _, q in out if q <= EMPTY_QUEUE]


@slow
@example(schedule=BaseLink(rate_bps=10_000_000, rtt_us=40_000).schedule(seed=0, queue_bdp=DEEP_QUEUE_BDP))
@given(schedule=deep_links)
def test_bbr_probes_rtt_within_its_period(longlook, target, schedule):
    """ProbeRTT: BBR refreshes its min_rtt at least once per period, by draining its
    flight (ProbeRTT) unless its datagrams met an empty queue anyway. On a long
    transfer over a clean deep link, the longest stretch in which no datagram of the
    flow met an empty bottleneck queue is at most 11 s (v1's 10 s period, ProbeRTT's
    200 ms, slack), from its first departure to its last. Trigger: a transfer
    longer than that period."""
    _bbr_only(target)
    base = _base(schedule)
    plan = TransferPlan(sizes=(int(base.rate_bps / 8 * (PROBE_RTT_PERIOD_S + 3)),))
    with longlook.run(target, schedule, plan, timeout_s=4 * (PROBE_RTT_PERIOD_S + 3) + 30) as obs:
        obs.completed()
        _link_bound(obs)
        out = _departures(obs)
        start, end = out[0][0], out[-1][0]
        if end - start <= PROBE_RTT_PERIOD_S * 1e6:
            outcomes.not_exercised(f"the transfer lasted {(end - start) / 1e6:.1f} s, not longer than the "
                                   f"{PROBE_RTT_PERIOD_S:.0f} s ProbeRTT period")
        marks = [start, *refreshes(out), end]
        gap, at = max((b - a, a) for a, b in zip(marks, marks[1:]))
        check(gap <= PROBE_RTT_PERIOD_S * 1e6, "no-probe-rtt", (
            f"{target.id}: over {(end - start) / 1e6:.1f} s of a clean {base.rate_bps / 1e6:.0f} Mbit/s, "
            f"{base.rtt_us / 1e3:.0f} ms link with an {DEEP_QUEUE_BDP:.0f}-BDP buffer, no datagram of the flow met "
            f"an empty queue for {gap / 1e6:.1f} s from +{(at - start) / 1e6:.1f} s: its min_rtt went unrefreshed "
            f"longer than any BBR's ProbeRTT period allows ({PROBE_RTT_PERIOD_S:.0f} s)"),
            longest_gap_s=gap / 1e6)


light_loss = replayable(lambda: st.builds(
    lambda p, seed: BaseLink().schedule(seed, s2c=BaseLink().settings(loss=IidLoss(round(p, 4)))),
    st.floats(min_value=0.002, max_value=0.01), st.integers(min_value=0, max_value=2**16)))()


@example(schedule=BaseLink().schedule(7, s2c=BaseLink().settings(loss=IidLoss(0.01))))
@given(schedule=light_loss)
def test_bbr_keeps_the_link_busy_under_light_random_loss(longlook, target, schedule):
    """With 0.2-1% random loss on a clean 20 Mbit/s, 40 ms, one-BDP link, the second
    half of the transfer keeps the link at least 50% busy. Trigger: a loss of the
    transfer's datagrams in that half (else the loss drawn never touched it)."""
    _bbr_only(target)
    base = _base(schedule)
    plan = TransferPlan(sizes=(6_000_000,))
    with longlook.run(target, schedule, plan) as obs:
        obs.completed()
        _link_bound(obs)
        out = _second_half(_departures(obs))
        t0, t1 = out[0][0], out[-1][0]
        lost = sum(1 for r in obs.transfer_records() if r.reason == "loss_iid" and t0 <= r.arr_us <= t1)
        if not lost:
            outcomes.not_exercised("no datagram of the transfer's second half was lost")
        used = sum(size for _, size, _ in out[1:]) * 8 / ((t1 - t0) / 1e6) / base.rate_bps
        check(used >= LOSSY_UTILISATION, "loss-collapse", (
            f"{target.id}: with {schedule.phases[0].s2c.loss.p:.2%} random loss ({lost} datagrams lost in the "
            f"second half) the flow used {used:.0%} of a clean {base.rate_bps / 1e6:.0f} Mbit/s link from "
            f"t={t0 / 1e6:.2f} s to {t1 / 1e6:.2f} s; BBR reacts to loss only above 2% per round (at least "
            f"{LOSSY_UTILISATION:.0%} expected)"), used=used, lost=lost)
