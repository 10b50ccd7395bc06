"""Persistent congestion collapses the window.

RFC 9002 §7.6: when every ack-eliciting packet sent over a period longer than the
persistent congestion duration, (smoothed_rtt + max(4·rttvar, kGranularity) +
max_ack_delay) × kPersistentCongestionThreshold (3), is lost, the sender reduces its
congestion window to kMinimumWindow (2 × max_datagram_size) (§7.6.2).
"""

from __future__ import annotations

from hypothesis import example, given

from harness.observe.events import Metrics, PacketSent
from harness.schedule import TransferPlan, strategies
from harness.schedule.strategies import BaseLink
from harness.verdict import analysis, outcomes
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(2_000_000,))
#: max_ack_delay a peer may advertise by default (RFC 9000 §18.2), µs.
MAX_ACK_DELAY_US = 25_000


def _duration_us(trace, before_us: float, rtt_us: float) -> float:
    """The persistent congestion duration (§7.6.1) by the sender's own last RTT
    estimates before the dark, or by a conservative one (rttvar = RTT/2) where it
    reports none; the longer of the two, so the sender gets the benefit of the doubt."""
    conservative = 3 * (rtt_us + 4 * rtt_us / 2 + MAX_ACK_DELAY_US)
    srtt = rttvar = None
    for m in trace.of(Metrics):
        if m.t_us >= before_us:
            break
        srtt = m.smoothed_rtt_us or srtt
        rttvar = m.rtt_variance_us or rttvar
    if srtt is None or rttvar is None:
        return conservative
    return max(conservative, 3 * (srtt + max(4 * rttvar, 1000) + MAX_ACK_DELAY_US))


@example(schedule=strategies.dark(BaseLink(), 0, 600, 1500))
@given(schedule=strategies.long_blackholes())
def test_persistent_congestion_collapses_window(longlook, target, schedule):
    """Once the link has dropped every data packet for longer than the persistent
    congestion duration, the window falls to kMinimumWindow (one datagram of slack)."""
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, PLAN, timeout_s=60) as obs:
        obs.completed()
        start_us = schedule.phases[1].start_us
        dropped = [r.arr_us for r in obs.ground_truth.records
                   if r.dir == "s2c" and r.proto == "udp" and r.reason == "blackhole"]
        trace = obs.sender
        duration_us = _duration_us(trace, start_us, 2 * schedule.phases[0].s2c.delay_us)
        if not (len(dropped) >= 2 and dropped[-1] - dropped[0] > duration_us):
            outcomes.not_exercised(f"the link dropped the transfer's datagrams for less than the persistent "
                                   f"congestion duration ({duration_us / 1e3:.0f} ms)")
        # §7.6.2 counts only losses after an RTT sample, while data flows: the
        # sender must have had an RTT sample and been sending data before the dark.
        sampled = any(m.smoothed_rtt_us is not None and m.t_us < start_us for m in trace.of(Metrics))
        sent_before = [p for p in trace.of(PacketSent) if p.space == "application" and p.t_us < start_us]
        if not (sampled and len(sent_before) >= 20):
            outcomes.not_exercised("the sender had no RTT sample or fewer than 20 packets sent before the dark")
        mss = analysis.max_datagram(trace)
        after = [(t, c) for t, c, _, _ in analysis.cwnd_series(trace) if t >= start_us]
        lowest = min(after, key=lambda tc: tc[1], default=None)
        check(lowest is not None and lowest[1] <= 3 * mss, "no-collapse", (
            f"{target.id}: the link dropped every datagram for {(dropped[-1] - dropped[0]) / 1e3:.0f} ms "
            f"(> {duration_us / 1e3:.0f} ms persistent congestion duration) but the lowest window after "
            f"{start_us / 1e6:.3f} s was {lowest[1] if lowest else None} bytes"
            f"{f' at t={lowest[0] / 1e6:.3f} s' if lowest else ''}; kMinimumWindow is {2 * mss}"
        ), lowest_over_mss=lowest[1] / mss if lowest else -1.0)
