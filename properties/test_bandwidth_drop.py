"""Recovery after a sudden bandwidth drop.

Gordo & Tatsis (KTH 2015) dropped a 40 Mbit/s bottleneck to 10% of its rate in the
middle of transfers and measured what each protocol got afterwards. A sender must
take the drop as congestion (RFC 9002 §7.3.2: it shows up as queue overflow, so as
loss) and shrink its window to what the slower path holds, one reduction per
recovery period, then keep that path busy.

The bottleneck keeps the drop-tail buffer it had before (one BDP at the old rate),
as a real shaper does. The path then holds `BDP_new + queue` bytes; anything above
that overflows. Its worst round trip is the base RTT plus a full buffer's drain time
at the new rate, and the window the sender had before the drop is at most
`BDP_old + queue`. With one reduction by β per round trip, a conformant controller
needs `ceil(log(window before / path) / log(1/β))` round trips to fit; we allow
that plus two (one to detect the first loss, one for its recovery period to end).
From then to the end of the transfer:

- the bottleneck overflows for at most 2% of the flow's datagrams (a controller
  between loss events loses one or a few per sawtooth; one that never fits keeps
  losing a share of every window), and
- the flow keeps the slower link at least 90% busy (no stall, no collapse).

Why not "queueing delay back near the base RTT", as the issue first put it: with a
buffer sized for the old rate, RFC 9002's loss-based controllers keep a standing queue
of at least `β·(BDP_new + queue) − BDP_new` after every reduction, by design; only a
delay-based controller (BBR) would drain it. The queueing delay is reported in the
message; the bound on it is the buffer's.
"""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import example, given
from hypothesis import strategies as st

from harness.run import Inconclusive
from harness.schedule import Phase, Schedule, TransferPlan, strategies
from harness.schedule.strategies import BaseLink
from harness.verdict import outcomes
from harness.verdict.bounds import BETA, transfer_time_bound_s
from harness.verdict.profiles import slow
from harness.verdict.deviation import check

#: Most of the flow's datagrams the bottleneck may drop once the sender has fitted.
OVERFLOW_SHARE = 0.02
#: Least the flow must keep the slower link busy once it has fitted.
BUSY = 0.90
#: Round trips on top of the β-derived count: one to see the first loss, one for
#: the recovery period it opens to end.
EXTRA_ROUND_TRIPS = 2
#: How long the flow is watched after it has had time to fit, seconds.
WATCH_S = 4.0


def drop(b: BaseLink, at_ms: int, fraction: float = 0.1) -> Schedule:
    """The data direction's rate falls to `fraction` at `at_ms`; the queue stays."""
    low = replace(b.settings(), rate_bps=max(int(b.rate_bps * fraction), 500_000))
    return b.schedule(0, phases=[Phase(start_us=at_ms * 1000, c2s=b.settings(), s2c=low)])


drops = strategies.replayable(lambda: st.builds(
    drop,
    st.builds(BaseLink, rate_bps=st.sampled_from([10_000_000, 20_000_000]),
              rtt_us=st.sampled_from([20_000, 40_000, 80_000])),
    st.integers(min_value=1500, max_value=3000),
    st.sampled_from([0.1, 0.25]),
))()


class DroppedPath:
    """What the schedule says about the path before and after the drop."""

    def __init__(self, schedule: Schedule):
        before, after = schedule.phases[0].s2c, schedule.phases[-1].s2c
        self.t0_us = schedule.phases[-1].start_us
        self.rate_old, self.rate_new = before.rate_bps, after.rate_bps
        self.rtt_us = 2 * before.delay_us
        self.queue = after.queue_bytes
        self.bdp_old = self.rate_old * self.rtt_us / 8e6
        self.bdp_new = self.rate_new * self.rtt_us / 8e6
        self.full_buffer_us = self.queue * 8e6 / self.rate_new

    def settle_us(self, beta: float) -> float:
        """Time a conformant controller needs to fit the slower path (module doc)."""
        ratio = (self.bdp_old + self.queue) / (self.bdp_new + self.queue)
        rounds = max(math.ceil(math.log(ratio) / math.log(1 / beta)), 1) + EXTRA_ROUND_TRIPS
        return rounds * (self.rtt_us + self.full_buffer_us)

    def plan(self) -> TransferPlan:
        """Enough data to keep the new rate busy while the slowest family (CUBIC)
        fits and for WATCH_S after, counting 80% of the old rate until the drop
        (start-up and slow start use less; what is left over lengthens the watch)."""
        before = 0.8 * self.rate_old * self.t0_us / 8e6
        after = self.rate_new * (self.settle_us(max(BETA.values())) / 1e6 + WATCH_S + 1) / 8
        return TransferPlan(sizes=(int(before + after),))


@slow
@example(schedule=drop(BaseLink(rate_bps=10_000_000, rtt_us=40_000), 2000))
@given(schedule=drops)
def test_sender_fits_a_sudden_bandwidth_drop(longlook, target, schedule):
    """After the bottleneck drops to 10% (or 25%) of its rate, within the round trips
    one reduction by β per round trip needs, the sender stops overflowing the buffer
    (≤ 2% of its datagrams dropped) and keeps the slower link ≥ 90% busy."""
    beta = BETA.get(target.cc.family)
    if beta is None:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no multiplicative decrease")
    path = DroppedPath(schedule)
    plan = path.plan()
    with longlook.run(target, schedule, plan, timeout_s=transfer_time_bound_s(schedule, sum(plan.sizes))) as obs:
        obs.completed()
        busy = obs.result.saturated()
        if busy:
            raise Inconclusive(f"{busy}: endpoint-bound, not link-bound")
        ours = obs.transfer_records()
        out = sorted((r.dep_us, r.size) for r in ours if r.dep_us is not None)
        largest = max(size for _, size in out)
        # As for utilisation: the transfer ends with its last full-size datagram.
        end_us = max(t for t, size in out if size >= largest // 2)
        start_us = path.t0_us + path.settle_us(beta)
        if end_us - start_us < 1e6:
            raise Inconclusive(
                f"{target.id}: the transfer ended {(end_us - path.t0_us) / 1e6:.2f} s after the drop, "
                f"too soon to watch it past the {path.settle_us(beta) / 1e6:.2f} s it may take to fit"
            )
        arrived = [r for r in ours if start_us <= r.arr_us <= end_us]
        overflowed = [r for r in arrived if r.fate == "dropped" and r.reason == "queue_full"]
        carried = sum(size for t, size in out if start_us <= t <= end_us)
        used = carried * 8e6 / (end_us - start_us) / path.rate_new
        queued = sorted(r.delay_us - path.rtt_us / 2 for r in arrived if r.delay_us is not None)
        context = (
            f"{path.rate_old / 1e6:.0f} → {path.rate_new / 1e6:.1f} Mbit/s at t={path.t0_us / 1e6:.2f} s, "
            f"{path.rtt_us / 1e3:.0f} ms RTT, {path.queue} B queue ({path.full_buffer_us / 1e3:.0f} ms when full "
            f"at the new rate); watched from t={start_us / 1e6:.2f} s (β {beta}) to {end_us / 1e6:.2f} s; "
            f"queueing delay there: median {queued[len(queued) // 2] / 1e3:.0f} ms, least {queued[0] / 1e3:.0f} ms"
            if queued else "no datagram delivered in the watched window"
        )
        check(len(overflowed) <= OVERFLOW_SHARE * len(arrived), "overflow-after-drop", (
            f"{target.id}: still overflowing the buffer after the drop: {len(overflowed)} of {len(arrived)} "
            f"datagrams dropped at the full queue (at most {OVERFLOW_SHARE:.0%}); {context}"
        ), overflow_share=len(overflowed) / max(len(arrived), 1))
        check(used >= BUSY, "underused-after-drop", (
            f"{target.id}: kept the slower link only {used:.0%} busy after the drop "
            f"(at least {BUSY:.0%} expected); {context}"
        ), used=used)
