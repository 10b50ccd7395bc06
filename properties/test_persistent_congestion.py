"""Persistent congestion collapses the window, and only losses after an RTT sample
establish it.

RFC 9002 §7.6: when every ack-eliciting packet sent over a period longer than the
persistent congestion duration, (smoothed_rtt + max(4·rttvar, kGranularity) +
max_ack_delay) × kPersistentCongestionThreshold (3), is lost, the sender reduces its
congestion window to kMinimumWindow (2 × max_datagram_size) (§7.6.2).
RFC 9002 §7.6.2: "The persistent congestion period SHOULD NOT start until there is at
least one RTT sample." Before it, the probe timer runs on the initial RTT (333 ms), so
a few probes already span a duration the first sample makes short.
"""

from __future__ import annotations

from hypothesis import example, given

from harness.observe.events import Metrics, PacketSent
from harness.schedule import TransferPlan, handshake, strategies
from harness.schedule.strategies import BaseLink
from harness import rfc
from harness.verdict import analysis, blackhole, growth, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.deviation import check
from harness.verdict.runner import HarnessError

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


def _first_sample_us(trace, end_us: float) -> float | None:
    """The sender's first RTT sample after the dark (µs): the first smoothed RTT it
    logged after `end_us` that differs from the last one before (its initial RTT, if
    it logs that), or that record's latest RTT if larger; None if it logged none."""
    initial = None
    for m in trace.of(Metrics):
        if m.t_us < end_us:
            initial = m.smoothed_rtt_us if m.smoothed_rtt_us is not None else initial
        elif m.smoothed_rtt_us is not None and m.smoothed_rtt_us != initial:
            return max(m.smoothed_rtt_us, m.latest_rtt_us or 0.0)
    return None


#: A transfer long enough to leave slow start's first rounds after the handshake.
HANDSHAKE_PLAN = TransferPlan(sizes=(300_000,))


@example(schedule=handshake.server_dark_from_start(BaseLink(rtt_us=40_000), 0, 2_500))
@given(schedule=handshake.server_dark_handshakes())
def test_no_collapse_from_losses_before_the_first_rtt_sample(longlook, target, schedule):
    """RFC 9002 §7.6.2, SHOULD: the server's direction drops everything from the
    start for 1.2-3.5 s, so every datagram the server loses leaves before its first RTT
    sample (none reached the client to be acknowledged). When they are declared lost,
    on the clean link after, the window must not collapse to kMinimumWindow (a cut of
    `blackhole.collapses`). Trigger: two of the dropped datagrams held ack-eliciting
    packets further apart than the persistent congestion duration the sender's first
    RTT sample gives (with rttvar = sample / 2 and max_ack_delay's 25 ms, the longest
    after a sample), so a sender counting them would establish persistent congestion."""
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, HANDSHAKE_PLAN, timeout_s=60) as obs:
        obs.completed()
        end_us = schedule.phases[1].start_us
        records = sorted((r for r in obs.transfer_records() if r.fate != "duplicate"), key=lambda r: r.arr_us)
        early = [r for r in records if r.fate != "dropped" and r.arr_us < end_us]
        if early:
            raise HarnessError(f"{target.id}: the link delivered a server datagram at t={early[0].arr_us / 1e6:.3f} s, "
                                 f"inside the dark that ends at {end_us / 1e6:.3f} s (the schedule was not applied)")
        span = analysis.longest_dropped_span(records, blackhole.ack_eliciting_by_link_index(obs), float("-inf"), end_us)
        trace = obs.sender
        sample = _first_sample_us(trace, end_us) or 2 * (schedule.phases[0].c2s.delay_us or 0)
        # At the first sample smoothed_rtt = sample and rttvar = sample / 2 (§5.3), the
        # longest duration any later estimate gives on this clean link.
        duration = 3 * (sample + max(2 * sample, 1000) + MAX_ACK_DELAY_US)
        if span <= duration:
            outcomes.not_exercised(f"the server's dropped ack-eliciting datagrams span {span / 1e3:.0f} ms, within the "
                                   f"persistent congestion duration its first sample gives ({duration / 1e3:.0f} ms)")
        mss = analysis.max_datagram(trace)
        cuts = blackhole.collapses(trace, target.cc.family)
        check(not cuts, "collapse-before-rtt-sample", lambda: (
            f"{target.id}: {cuts[0].describe()}, a collapse to kMinimumWindow ({2 * mss} B), after a dark that ended "
            f"at {end_us / 1e6:.3f} s: the server's only losses were sent before its first RTT sample (they span "
            f"{span / 1e3:.0f} ms, the persistent congestion duration by its first sample is {duration / 1e3:.0f} ms); "
            f"RFC 9002 §7.6.2: the period SHOULD NOT start until there is at least one RTT sample"
        ), span_over_duration=span / duration)


#: A min_rtt this far above the old one (a fraction of the extra path delay) has been
#: reset: every sample after the outage exceeds the old min_rtt by the whole extra.
RESET_FRACTION = 0.5


@example(schedule=strategies.dark_then_longer(BaseLink(), 0, 600, 1500, 40))
@given(schedule=strategies.blackholes_then_longer())
def test_min_rtt_resets_after_persistent_congestion(longlook, target, schedule):
    """RFC 9002 §5.2: "Endpoints SHOULD set the min_rtt to the newest RTT sample after
    persistent congestion is established." The data direction goes dark long enough
    for persistent congestion and comes back over a path 20-60 ms longer, so every RTT
    sample after the outage exceeds the min_rtt before it by that much. The min_rtt the
    sender logs last must sit above the one it logged before the collapse by at least
    half the extra delay (it would stay where it was without the reset). Trigger: the
    sender cut its window from at least 8 datagrams to at most 3 once the outage was
    over (persistent congestion established) and logged an RTT estimate after it."""
    outcomes.require(target, "congestion_window")
    outcomes.require(target, "min_rtt")
    # Whether the sender collapses at all is its habit more than the schedule's doing
    # (several stacks never do, docs/findings.md): a rare trigger.
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN, timeout_s=60) as obs:
        obs.completed()
        trace = obs.sender
        dark_from = schedule.phases[1].start_us
        # Persistent congestion established: the window cut to about kMinimumWindow
        # once acknowledgements came back after an outage longer than its duration
        # (§7.6.2 declares it on the acknowledgement that shows the losses). A cut
        # inside the outage is a timer's (picoquic's RTO-like collapse, F83), not it.
        mss = analysis.max_datagram(trace)
        light_from = schedule.phases[2].start_us
        cuts = [c for c in analysis.reductions(trace) if c.t_us >= light_from and c.after <= 3 * mss
                and c.before >= 8 * mss]
        if not cuts:
            outcomes.not_exercised("the sender established no persistent congestion (no collapse to kMinimumWindow "
                                   "once the outage was over)")
        at = cuts[0].t_us
        metrics = trace.of(Metrics)
        before = [m.min_rtt_us for m in metrics if m.min_rtt_us is not None and m.t_us < dark_from]
        after = [m for m in metrics if m.t_us > at]
        if not before or not any(m.latest_rtt_us is not None or m.smoothed_rtt_us is not None for m in after):
            outcomes.not_exercised("the sender logged no min_rtt before the outage, or no RTT estimate after the collapse")
        # The last min_rtt logged at all: a stack that logs only what changed (quinn)
        # logs no new one when it keeps the old.
        last = next((m.min_rtt_us for m in reversed(metrics) if m.min_rtt_us is not None), None)
        extra_us = (schedule.phases[2].s2c.delay_us + schedule.phases[2].c2s.delay_us
                    - schedule.phases[0].s2c.delay_us - schedule.phases[0].c2s.delay_us)
        old = before[-1]
        check(last is not None and last >= old + RESET_FRACTION * extra_us, "min-rtt-not-reset", lambda: (
            f"{target.id}: after persistent congestion ({cuts[0].describe()}) the path came back "
            f"{extra_us / 1e3:.0f} ms longer, yet the last min_rtt logged is "
            f"{'none' if last is None else f'{last / 1e3:.1f} ms'}, against {old / 1e3:.1f} ms before the outage: "
            f"not reset to a sample taken after it (RFC 9002 §5.2)"
        ), min_rtt_rise_over_extra=((last or 0) - old) / extra_us)


#: RFC 9438 §4.8: long enough for slow start, the outage, the slow start back and
#: more than a second of the congestion avoidance after it on big_bdp_blackholes' links.
REGROWTH_PLAN = TransferPlan(sizes=(10_000_000,))
#: The first congestion avoidance stage after the collapse is judged this long at
#: most (s), and at least REGROWTH_MIN_S of it, or no curve can show.
REGROWTH_S = 1.5
REGROWTH_MIN_S = 0.5


@example(schedule=strategies.dark(BaseLink(rate_bps=30_000_000, rtt_us=100_000), 0, 1200, 1500))
@given(schedule=strategies.big_bdp_blackholes())
def test_cubic_regrows_from_the_window_it_restarts_with(longlook, target, schedule):
    """RFC 9438 §4.8: after a timeout (in QUIC, the collapse of persistent
    congestion), "during the first congestion avoidance stage ... K is set to 0, and
    W_max is set to the congestion window size at the beginning of the current
    congestion avoidance stage. In addition, for the Reno-friendly region, W_est
    SHOULD be set to the congestion window size at the beginning of the current
    congestion avoidance." Both say the stage grows from its own first window
    W_start: t into it the window stays within the larger of W_start + C·(t + RTT)³
    datagrams (K = 0) and W_start + (t / RTT + 1) datagrams (W_est, α at most 1), plus
    two datagrams. A sender that keeps the W_max or W_est it had before the outage
    climbs back toward that window, concave, far faster. Trigger: a collapse to about
    kMinimumWindow once the outage began, the slow start after it over, REGROWTH_MIN_S
    of congestion avoidance with no reduction and data to send, and a curve toward
    the window before the outage (its W_max lowered by fast convergence, t from the
    stage's start) that would break the bound by more than two datagrams."""
    if target.cc.family != "cubic":
        outcomes.not_applicable(f"a rule of CUBIC; {target.cc.name} is {target.cc.family}")
    outcomes.require(target, "congestion_window")
    outcomes.require(target, "smoothed_rtt")
    # Whether a stack collapses at all is its habit more than the schedule's (several
    # never do, docs/findings.md): a rare trigger.
    with outcomes.rare_trigger(), longlook.run(target, schedule, REGROWTH_PLAN, timeout_s=90) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        dark_from = schedule.phases[1].start_us
        cuts = analysis.reductions(trace)
        series = [(t, c) for t, c, _, _ in analysis.cwnd_series(trace)]
        collapse = growth.last_collapse(cuts, series, dark_from, mss)
        if collapse is None:
            outcomes.not_exercised("no collapse to about kMinimumWindow once the outage began")
        prior = next((c for t, c in reversed(series) if t < dark_from), None)
        rtts = [s for t, s in analysis.smoothed_rtt_us(trace) if t > collapse.t_us]
        if prior is None or not rtts:
            outcomes.not_exercised("the sender logged no window before the outage or no smoothed RTT after the collapse")
        srtt = min(rtts)  # the most round trips: the most Reno-friendly growth allowed
        sends = analysis.ack_eliciting_sends(obs.wire)
        last = min(series[-1][0], (sends[-1] if sends else 0.0) - srtt)
        start = growth.avoidance_starts(obs, trace, collapse.t_us, last, srtt)
        if start is None:
            outcomes.not_exercised(f"the slow start after the collapse ({collapse.describe()}) did not end while "
                                   "the sender had data to send")
        t0, w_start = start
        again = next((c.t_us for c in cuts if c.t_us > t0), last)
        t_end = min(t0 + REGROWTH_S * 1e6, again, last)
        if t_end - t0 < REGROWTH_MIN_S * 1e6:
            outcomes.not_exercised(f"{(t_end - t0) / 1e3:.0f} ms of congestion avoidance after the collapse before "
                                   f"another reduction or the end of the data, under {REGROWTH_MIN_S} s")

        def bound(t_us: float) -> float:
            into_s = (t_us - t0 + srtt) / 1e6
            return max(w_start + rfc.CUBIC_C * into_s ** 3 * mss, w_start + ((t_us - t0) / srtt + 1) * mss) + 2 * mss

        stale_w_max = prior * (1 + BETA["cubic"]) / 2
        stale = rfc.cubic_window((t_end - t0 + srtt) / 1e6, stale_w_max, w_start, mss)
        if stale <= bound(t_end) + 2 * mss:
            outcomes.not_exercised(f"a curve toward the window before the outage ({prior} B, W_max "
                                   f"{stale_w_max:.0f} B) gives {stale:.0f} B after {(t_end - t0) / 1e3:.0f} ms, within "
                                   f"{2 * mss} B of the bound {bound(t_end):.0f} B: no deviation could show")
        judged = [(t, c) for t, c in series if t0 < t <= t_end]
        worst = max(judged, key=lambda tc: tc[1] / bound(tc[0]), default=None)
        over = worst if worst is not None and worst[1] > bound(worst[0]) else None
        check(over is None, "regrowth-toward-old-window", lambda: (
            f"{target.id}: after {collapse.describe()} (persistent congestion; {prior} B before the outage at "
            f"t={dark_from / 1e6:.3f} s), congestion avoidance began at t={t0 / 1e6:.3f} s with {w_start} B; "
            f"{(over[0] - t0) / 1e3:.0f} ms into it the window was {over[1]} B, above {bound(over[0]):.0f} B, the "
            f"larger of W_cubic with K = 0 and W_max = {w_start} B and W_est from {w_start} B (smoothed RTT "
            f"{srtt / 1e3:.1f} ms) plus two datagrams; a curve toward the old window gives {stale:.0f} B by "
            f"t={t_end / 1e6:.3f} s (RFC 9438 §4.8)"
        ), window=over[1] if over else 0, bound=bound(over[0]) if over else 0.0,
           over_bound=over[1] / bound(over[0]) if over else 0.0)
