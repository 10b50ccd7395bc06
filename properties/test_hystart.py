"""HyStart++ (RFC 9406), the delay-based slow start RFC 9438 §4.10 asks CUBIC to use:
leave slow start when each round's minimum RTT rises by RttThresh
(max(4 ms, min(16 ms, lastRoundMinRTT / 8))), through conservative slow start, which
grows the window by the bytes acknowledged divided by CSS_GROWTH_DIVISOR (at least 2,
4 recommended) for CSS_ROUNDS (5) rounds, then congestion avoidance.

The links are clean with a deep queue (strategies.deep_clean): slow start's growing
flight builds a queue, and the round trip rises, long before anything is dropped.
Conservative slow start is judged where the sender's log names it (the
`conservative_slow_start` capability: quiche); from outside it looks like slow start
with slower growth, which the delay-exit property reads as the response it looks for.
"""

from __future__ import annotations

from hypothesis import example, given

from harness.observe.events import CongestionState, Metrics
from harness.run import Inconclusive
from harness.schedule import TransferPlan, strategies
from harness.verdict import analysis, growth, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.css import CSS, MAX_RTT_THRESH_US
from harness.verdict.deviation import check
from harness.verdict.growth import avoidance_starts, growth_slowed_at
from properties.test_slow_start import EXITS, MIN_RTT_INCREASE_US

#: RFC 9406 §4.3: "The minimum value of CSS_GROWTH_DIVISOR MUST be at least 2."
MIN_CSS_GROWTH_DIVISOR = 2
CSS_PLAN = TransferPlan(sizes=(4_000_000,))


def _judged_where_css_is_logged(target) -> None:
    """Skips a controller without slow start, and a stack whose log does not name
    conservative slow start (from outside it looks like slow start)."""
    if target.cc.family not in BETA:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no slow start rule here")
    outcomes.require(target, "conservative_slow_start")


def css_intervals(trace) -> list[tuple[float, float]]:
    """(start, end) µs of each stretch the sender logged as conservative slow start:
    from that state to the next state it logged, or to the trace's end."""
    states = trace.of(CongestionState)
    end_of_trace = max((e.t_us for e in trace.events), default=0.0)
    return [(s.t_us, nxt.t_us if nxt else end_of_trace)
            for s, nxt in zip(states, [*states[1:], None]) if s.raw == CSS]


@example(schedule=strategies.CLEAN_DEEP_LINK)
@given(schedule=strategies.deep_clean())
def test_conservative_slow_start_grows_at_most_half_as_fast(longlook, target, schedule):
    """RFC 9406 §4.2-4.3 (HyStart++): in conservative slow start the window grows by
    the bytes acknowledged divided by CSS_GROWTH_DIVISOR, and "the minimum value of
    CSS_GROWTH_DIVISOR MUST be at least 2". Over each stretch the sender logs as
    conservative slow start, the window rises by at most half the bytes newly
    acknowledged on the wire in it, plus one datagram of rounding. Judged where the
    sender's log names that state (quiche); from outside, conservative slow start
    with too small a divisor looks like slow start. Trigger: a logged stretch in
    which at least four datagrams were acknowledged (a deep queue the growing flight
    fills raises the round trip by RFC 9406's RttThresh)."""
    _judged_where_css_is_logged(target)
    with longlook.run(target, schedule, CSS_PLAN) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        series = analysis.cwnd_series(trace)
        stretches = []
        for start, end in css_intervals(trace):
            before = next((w for t, w, *_ in reversed(series) if t <= start), None)
            inside = [w for t, w, *_ in series if start <= t < end]
            if before is None:
                continue
            try:
                acked = analysis.bytes_newly_acknowledged(obs.wire, start, end)
            except Inconclusive as e:
                outcomes.not_exercised(f"the capture could not be read for the bytes acknowledged: {e}")
            if acked >= 4 * mss:
                stretches.append((start, end, before, max(inside, default=before) - before, acked))
        if not stretches:
            outcomes.not_exercised("no stretch of conservative slow start logged with four datagrams acknowledged "
                                   "in it (the round trip never rose by RttThresh in slow start)")
        worst = max(stretches, key=lambda s: (s[3] - mss) / s[4])
        start, end, before, grown, acked = worst
        check(grown <= acked / MIN_CSS_GROWTH_DIVISOR + mss, "css-divisor-below-two", lambda: (
            f"{target.id}: in conservative slow start from t={start / 1e6:.3f} s to {end / 1e6:.3f} s the window "
            f"grew by {grown} B (from {before} B) while {acked} B were newly acknowledged: "
            f"{grown / acked:.2f} of them, a CSS_GROWTH_DIVISOR of {acked / max(grown, 1):.2f}; RFC 9406 §4.3 "
            f"requires at least {MIN_CSS_GROWTH_DIVISOR}"
        ), growth_per_byte=grown / acked, stretches=len(stretches))



#: RFC 9406 §4.3's CSS_ROUNDS, and the round trips of slack a stretch may run beyond
#: it: rounds are counted here from the sender's RTT samples, not its packet numbers.
CSS_ROUNDS, CSS_ROUNDS_SLACK = 5, 2


def rounds_between(trace, t0_us: float, t1_us: float) -> float | None:
    """Round trips from t0 to t1 by the sender's own RTT samples: the integral of
    dt / latest_rtt, each sample holding until the next (None without samples)."""
    samples = [(m.t_us, m.latest_rtt_us) for m in trace.of(Metrics) if m.latest_rtt_us]
    before = [r for t, r in samples if t <= t0_us]
    rtt = before[-1] if before else None
    rounds, prev = 0.0, t0_us
    for t, r in samples:
        if t <= t0_us:
            continue
        if t >= t1_us:
            break
        if rtt:
            rounds += (t - prev) / rtt
        prev, rtt = t, r
    if rtt is None:
        return None
    return rounds + (t1_us - prev) / rtt


@example(schedule=strategies.CLEAN_DEEP_LINK)
@given(schedule=strategies.deep_clean())
def test_conservative_slow_start_ends_after_its_rounds(longlook, target, schedule):
    """RFC 9406 §4.2 (HyStart++'s example algorithm): "If CSS_ROUNDS rounds are
    complete, enter congestion avoidance by setting the ssthresh to the current cwnd",
    with CSS_ROUNDS 5. A stretch the sender logs as conservative slow start lasts at
    most CSS_ROUNDS + CSS_ROUNDS_SLACK round trips (counted by its own RTT samples);
    a loss, an ECN mark or a fall of the RTT may end it sooner. Judged where the log
    names that state (quiche). Trigger: a logged stretch of conservative slow start
    that the transfer outlasted."""
    _judged_where_css_is_logged(target)
    with longlook.run(target, schedule, CSS_PLAN) as obs:
        obs.completed()
        trace = obs.sender
        end_of_trace = max((e.t_us for e in trace.events), default=0.0)
        ended = [(a, b) for a, b in css_intervals(trace) if b < end_of_trace]
        if not ended:
            outcomes.not_exercised("no stretch of conservative slow start logged that ended before the transfer")
        counted = [(a, b, rounds_between(trace, a, b)) for a, b in ended]
        counted = [(a, b, r) for a, b, r in counted if r is not None]
        if not counted:
            outcomes.not_exercised("the sender logged no RTT sample to count rounds by")
        a, b, longest = max(counted, key=lambda c: c[2])
        check(longest <= CSS_ROUNDS + CSS_ROUNDS_SLACK, "css-too-long", lambda: (
            f"{target.id}: conservative slow start from t={a / 1e6:.3f} s to {b / 1e6:.3f} s lasted "
            f"{longest:.1f} round trips by its own RTT samples; RFC 9406 §4.2's example leaves it for "
            f"congestion avoidance after CSS_ROUNDS = {CSS_ROUNDS}"
        ), rounds=longest)


# RFC 9406's largest RttThresh (css.MAX_RTT_THRESH_US): a queue risen by this much has
# raised every round's minimum RTT past the threshold, whatever the round trip.
#: Round trips a delay-based exit may take after that rise: the round that sees it
#: (N_RTT_SAMPLE samples in), and CSS_ROUNDS of conservative slow start at most before
#: the exit to congestion avoidance; the first stretch of conservative slow start
#: counts as the exit.
DELAY_EXIT_RTTS = 3


def standing_queue_since(records, link, queue_us: float, span_us: float) -> float | None:
    """The end of the first span of `span_us` (consecutive, from the first datagram)
    in which every datagram of the sender's met at least `queue_us` of queue at the
    bottleneck: a rise of each round's minimum RTT, which is what HyStart++ compares,
    not of one datagram's."""
    timed = [(r.arr_us, r.delay_us - link.delay_us - r.size * 8e6 / link.rate_bps)
             for r in records if r.delay_us is not None]
    if not timed:
        return None
    t0 = timed[0][0]
    spans: dict[int, float] = {}
    for t, q in timed:
        k = int((t - t0) // span_us)
        spans[k] = min(spans.get(k, q), q)
    k = next((k for k in sorted(spans) if spans[k] >= queue_us), None)
    return None if k is None else t0 + (k + 1) * span_us


@example(schedule=strategies.CLEAN_DEEP_LINK)
@given(schedule=strategies.deep_clean())
def test_slow_start_ends_on_the_delay_increase_before_any_loss(longlook, target, schedule):
    """RFC 9438 §4.10: "In general, CUBIC SHOULD use the HyStart++ slow start
    algorithm" (RFC 9406), which leaves slow start when the round trip rises, before
    the queue overflows. On a clean link with a deep queue, once the sender's
    datagrams meet MAX_RTT_THRESH_US of queue, slow start ends (its first exit, as
    logged or inferred; a logged stretch of conservative slow start; or a round trip
    in which the window grew by at most half the bytes acknowledged) within
    DELAY_EXIT_RTTS round trips, and before the link drops any of its datagrams (a
    standing queue: every datagram of a round trip met that much, standing_queue_since).
    Trigger: the queue rose by that much, with those round trips left before the
    first drop (or the end of the transfer)."""
    if target.cc.family != "cubic":
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}): the rule is RFC 9438's, CUBIC's")
    outcomes.require(target, "congestion_window")
    link = schedule.phases[0].s2c
    with longlook.run(target, schedule, CSS_PLAN) as obs:
        obs.completed()
        trace = obs.sender
        records = obs.transfer_records()
        first_drop = min((r.arr_us for r in records if r.fate == "dropped"), default=None)
        end = first_drop if first_drop is not None else max(r.arr_us for r in records)
        rtt_us = 2 * link.delay_us + MAX_RTT_THRESH_US
        rise = standing_queue_since(records, link, MAX_RTT_THRESH_US, rtt_us)
        if rise is None or rise + DELAY_EXIT_RTTS * rtt_us > end:
            outcomes.not_exercised("the queue never rose by 16 ms with "
                                   f"{DELAY_EXIT_RTTS} round trips left before the first drop or the end")
        # A connection begins in slow start (RFC 9002 §7.3.1): its first state of
        # another kind is the exit, even where the log's first state is that one.
        exits = [s.t_us for s in analysis.states(trace, BETA["cubic"]) if s.state in EXITS][:1]
        exits += [s.t_us for s in trace.of(CongestionState) if s.raw == CSS]
        # No delay-based exit reacts before the queue reaches RFC 9406's least
        # RttThresh; a stall before it (flow control, an idle sender) is no response.
        first_rise = standing_queue_since(records, link, MIN_RTT_INCREASE_US, rtt_us) or rise
        slowed = growth_slowed_at(obs, trace, first_rise - rtt_us, end, rtt_us)
        exit_us = min([*exits, *([slowed] if slowed is not None else [])], default=None)
        deadline = rise + DELAY_EXIT_RTTS * rtt_us
        check(exit_us is not None and exit_us <= deadline, "no-delay-based-exit", lambda: (
            f"{target.id}: on a clean link with a deep queue the sender's datagrams met "
            f"{MAX_RTT_THRESH_US / 1e3:.0f} ms of queue from t={rise / 1e6:.3f} s, and slow start "
            + (f"ended only at {exit_us / 1e6:.3f} s" if exit_us is not None else "never ended")
            + (f", after the link's first drop at {first_drop / 1e6:.3f} s" if first_drop is not None
               and (exit_us is None or exit_us > first_drop) else "")
            + f"; HyStart++ (RFC 9438 §4.10, SHOULD) leaves it within about {DELAY_EXIT_RTTS} round trips"
        ), rise_us=rise, exit_us=exit_us if exit_us is not None else -1)


#: A slow start after the collapse that ends under this many times the collapsed window
#: never began: HyStart++'s first exit needs eight RTT samples a round.
SLOW_STARTED = 4
#: Slow start, an outage of 1-2 s, and the slow start after the collapse, at 30-40 Mbit/s
#: (what follows it runs on a round trip of hundreds of ms: kept short).
AFTER_COLLAPSE_PLAN = TransferPlan(sizes=(10_000_000,))


@example(schedule=strategies.dark_then_rising_delay(strategies.BaseLink(rate_bps=30_000_000, rtt_us=80_000), 0,
                                                    1200, 1200, 4500))
@given(schedule=strategies.blackholes_then_rising_delay())
def test_slow_start_after_a_collapse_ends_at_ssthresh_not_on_delay(longlook, target, schedule):
    """RFC 9406 §4.3: "An implementation SHOULD use HyStart++ only for the initial
    slow start ... and SHOULD use traditional slow start for subsequent slow starts"
    (they have ssthresh from a congestion event to aim for). After persistent
    congestion's collapse (an outage of seconds), the path's round trip grows more
    than RttThresh every round (dark_then_rising_delay), which a delay-based exit reads as a full queue.
    The slow start after the collapse must not end (its first state of another kind,
    ssthresh logged at or below the window, or a round trip in which the window grew
    by at most half the bytes acknowledged: growth.avoidance_starts) below half the
    ssthresh the collapse kept (β of the window it fell from, or the ssthresh logged
    with it if lower) unless the link dropped or marked a datagram first, or the
    window fell (the sender answered something else). Trigger: a collapse
    to about kMinimumWindow once the outage began, and a slow start after it that
    either ended or reached half that ssthresh while the path was still growing, and
    had slow-started (an end under SLOW_STARTED times the collapsed window is the
    sender's own low ssthresh, which no delay-based exit explains)."""
    if target.cc.family not in BETA:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no slow start rule here")
    outcomes.require(target, "congestion_window")
    dark_from = schedule.phases[1].start_us
    ramp_end = schedule.phases[-1].start_us
    # Whether a stack collapses at all is its habit (several never do, docs/findings.md).
    with outcomes.rare_trigger(), longlook.run(target, schedule, AFTER_COLLAPSE_PLAN, timeout_s=90) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        cuts = analysis.reductions(trace)
        series = [(t, c) for t, c, _, _ in analysis.cwnd_series(trace)]
        collapse = growth.last_collapse(cuts, series, dark_from, mss)
        if collapse is None:
            outcomes.not_exercised("no collapse to about kMinimumWindow once the outage began")
        # The ssthresh the slow start aims for: what the congestion event behind the
        # collapse set, β of the window it fell from, or less where the log says so
        # (a value logged earlier and carried along may be stale: never more).
        ssthresh = BETA[target.cc.family] * collapse.before
        if collapse.ssthresh and collapse.ssthresh < ssthresh:
            ssthresh = collapse.ssthresh
        if ssthresh < 16 * mss:
            outcomes.not_exercised(f"the collapse ({collapse.describe()}) kept no ssthresh of 16 datagrams or "
                                   f"more to aim for (ssthresh {ssthresh})")
        rtts = [r for t, r in analysis.smoothed_rtt_us(trace) if t > collapse.t_us]
        srtt = min(rtts) if rtts else 2.0 * schedule.phases[0].s2c.delay_us
        records = obs.transfer_records()
        # The outage's own drops are behind the collapse, not a signal in the slow
        # start after it (a stack may collapse on its timer inside the outage: picoquic).
        light_from = max(collapse.t_us, schedule.phases[2].start_us)
        signal = min((r.arr_us for r in records if r.arr_us > light_from
                      and (r.fate == "dropped" or "ce" in r.marks)), default=float("inf"))
        # A delay-based exit slows growth; it never lowers the window. A fall (however
        # small) ends the slow start judged: the sender answered something else
        # (picoquic collapses again on its timer once the path is back).
        fall = next((t for (_, w0), (t, w) in zip(series, series[1:]) if t > collapse.t_us and w < w0),
                    float("inf"))
        end = min(ramp_end, signal, fall, series[-1][0])
        # Acknowledgements of packets sent before the collapse grow no window: the
        # slow start is read from those of packets sent after it.
        exit_ = avoidance_starts(obs, trace, collapse.t_us, end, srtt, sent_after_us=collapse.t_us)
        half = ssthresh / 2
        reached = next((t for t, w in series if collapse.t_us < t <= end and w >= half), None)
        if exit_ is None and reached is None:
            outcomes.not_exercised(f"the slow start after {collapse.describe()} neither ended nor reached half its "
                                   f"ssthresh ({half:.0f} B) while the path grew longer and nothing was dropped")
        early = exit_ is not None and exit_[1] < half and (reached is None or exit_[0] < reached)
        if early and exit_[1] < SLOW_STARTED * collapse.after:
            # HyStart++ samples N_RTT_SAMPLE (8) RTTs a round, so no delay-based exit
            # comes before the window has doubled twice from kMinimumWindow; an end
            # sooner is the sender's own low ssthresh (after timer collapses in the
            # outage: picoquic), which RFC 9406 does not speak of.
            outcomes.not_exercised(f"after {collapse.describe()} the window never slow-started: growth slowed at "
                                   f"{exit_[1]} B (t={exit_[0] / 1e6:.3f} s), under {SLOW_STARTED}× the collapsed "
                                   f"window, before any delay-based exit could react")
        check(not early, "delay-exit-after-collapse", lambda: (
            f"{target.id}: after {collapse.describe()} (persistent congestion, ssthresh {ssthresh:.0f} B), the "
            f"slow start ended at t={exit_[0] / 1e6:.3f} s with the window at {exit_[1]} B, under half that "
            f"ssthresh, with nothing dropped or marked, while the path's round trip rose each round: a delay-based "
            f"exit (RFC 9406 §4.3: HyStart++ SHOULD be used only for the initial slow start)"
        ), window_at_exit=exit_[1] if exit_ else 0, ssthresh=ssthresh)
