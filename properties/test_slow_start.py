"""Slow start: the window it starts from, that a connection begins in it, and its end
on a congestion signal.

RFC 9002 §7.2: "Endpoints SHOULD use an initial congestion window of 10 times the
maximum datagram size (max_datagram_size), while limiting the window to the larger
of 14720 bytes or twice the maximum datagram size." QUIC's smallest datagram is
1200 bytes, so the recommended window lies between 12000 bytes and
max(14720, 2 × max_datagram_size), whatever size a sender chose.

RFC 9002 §7.3.1: a sender in slow start leaves it when a packet is declared lost or
an ECN-CE count rises; RFC 9406 (HyStart++) lets it leave earlier when the RTT rises
by at least max(4 ms, min(16 ms, minRTT/8)). A sender that leaves slow start with
none of these in the ground truth (nothing dropped or reordered, nothing CE-marked,
no queue building at the bottleneck) stops growing for no reason the network gave,
and under-uses the path for many round trips (Kakhki et al. §4.1 found Chromium's
window pinned at a cap instead).

The exit is the first change from SlowStart to another base state (as logged, or
inferred where the stack logs no states); the evidence is looked for in the last
EVIDENCE_RTTS round trips before it.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from harness import rfc
from harness.observe import dialects
from harness.observe.events import CongestionState, Metrics, PacketAcked, PacketSent
from harness.run import Inconclusive
from harness.schedule import TransferPlan, strategies
from harness.verdict import analysis, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(2_000_000,))
#: How far back a signal may lie: a loss is declared up to about two RTTs after the
#: datagram was dropped (time threshold, then the ACK's way back).
EVIDENCE_RTTS = 3
#: RFC 9406's smallest RTT increase that ends slow start, µs.
MIN_RTT_INCREASE_US = 4_000
EXITS = {"CongestionAvoidance", "CongestionAvoidanceMaxed", "Recovery"}


@example(schedule=strategies.CLEAN_LINK)
@given(schedule=strategies.loss_only())
def test_slow_start_ends_on_a_congestion_signal(longlook, target, schedule):
    """The first exit from slow start follows a drop, a reordering, an ECN-CE mark
    or a queue at the bottleneck of at least 4 ms."""
    if target.cc.family not in BETA:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no slow start rule here")
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace = obs.sender
        seq = analysis.states(trace, BETA[target.cc.family])
        exit_ = next((b for a, b in zip(seq, seq[1:]) if a.state == "SlowStart" and b.state in EXITS), None)
        if exit_ is None:
            return  # still in slow start at the end: nothing to explain
        phase = schedule.phases[0].s2c
        rtt_us = 2 * phase.delay_us
        since = exit_.t_us - EVIDENCE_RTTS * rtt_us
        ours = [r for r in obs.transfer_records() if since <= r.arr_us <= exit_.t_us]
        dropped = [r for r in ours if r.fate == "dropped"]
        marked = [r for r in ours if {"ce", "held", "reordered_by_jitter"} & set(r.marks)]
        queued = max((r.delay_us - phase.delay_us - r.size * 8e6 / phase.rate_bps
                      for r in ours if r.delay_us is not None), default=0.0)
        declared = [l for l in analysis.losses(trace) if since <= l.t_us <= exit_.t_us]
        check(dropped or marked or declared or queued >= MIN_RTT_INCREASE_US, "exit-without-signal", (
            f"{target.id}: slow start ended at t={exit_.t_us / 1e6:.3f} s (→ {exit_.state}"
            f"{', inferred' if exit_.inferred else ''}) with no congestion signal in the {EVIDENCE_RTTS} RTTs before: "
            f"nothing dropped, CE-marked or reordered, no loss declared, at most {queued / 1e3:.1f} ms of queue "
            f"(HyStart++ needs ≥ {MIN_RTT_INCREASE_US / 1e3:.0f} ms)"
        ), queued_us=queued)


MIN_DATAGRAM, IW_CAP = rfc.MIN_DATAGRAM, rfc.IW_CAP


def initial_window_bounds(max_datagram: int) -> tuple[int, int]:
    """(lowest, highest) initial window §7.2 recommends for a sender whose datagrams
    are at most `max_datagram` bytes: 10 × its max_datagram_size, capped at
    max(14720, 2 × it), for some size between 1200 and `max_datagram`."""
    return rfc.initial_window(MIN_DATAGRAM), rfc.initial_window(max(max_datagram, MIN_DATAGRAM))


def first_window_before_any_ack(trace) -> tuple[float, int] | None:
    """(t_us, cwnd) of the sender's first logged window if it was logged before any
    acknowledgment could have moved it: before its first send (nothing to
    acknowledge yet), or before the first acknowledgment its log shows."""
    first = next(((m.t_us, m.congestion_window) for m in trace.of(Metrics) if m.congestion_window is not None), None)
    if first is None:
        return None
    first_send = min((p.t_us for p in trace.of(PacketSent)), default=None)
    first_ack = min((a.t_us for a in trace.of(PacketAcked)), default=None)
    if (first_send is not None and first[0] <= first_send) or (first_ack is not None and first[0] < first_ack):
        return first
    return None


@given(schedule=st.just(strategies.CLEAN_LINK))
def test_initial_window_is_ten_datagrams(longlook, target, schedule):
    """RFC 9002 §7.2: the window the sender starts with (its first logged window,
    before any acknowledgment) is 10 × max_datagram_size capped at max(14720,
    2 × max_datagram_size): between 12000 bytes and that cap for the largest
    datagram the sender sent. The window does not depend on the link, so one run
    on the clean link judges it. §7.2 binds every controller (BBR too).

    A sender whose log has no window (a browser's NetLog) is judged from the wire:
    its flight, less what the acknowledgments so far could have added, is a floor on its
    initial window (analysis.initial_window_floor), which must not exceed the cap. Too small a
    window cannot be seen that way (a flight may be smaller than the window)."""
    if not dialects.of_stack(target.stack.name, bool(target.stack.honours.get("qlog"))).logs("congestion_window"):
        return _initial_window_from_the_wire(longlook, target, schedule)
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace = obs.sender
        first = first_window_before_any_ack(trace)
        if first is None:
            outcomes.not_exercised("the sender logged no window before its first send or first acknowledgment")
        mds = analysis.max_datagram(trace)
        try:
            mds = max([mds, *(d.udp_size for d in obs.wire.datagrams if d.entered and d.direction == "s2c")])
        except Inconclusive:
            pass  # no readable capture: the log's packet sizes alone
        low, high = initial_window_bounds(mds)
        t_us, cwnd = first
        check(cwnd <= high, "initial-window-too-large",
              f"{target.id}: initial window {cwnd} B (logged at t={t_us / 1e6:.4f} s) is above {high} B, "
              f"min(10 × {mds}, max({IW_CAP}, 2 × {mds})) for its largest datagram ({mds} B)",
              window=cwnd, over_cap=cwnd / high)
        check(cwnd >= low, "initial-window-too-small",
              f"{target.id}: initial window {cwnd} B (logged at t={t_us / 1e6:.4f} s) is below {low} B, "
              f"10 datagrams of QUIC's smallest size ({MIN_DATAGRAM} B)",
              window=cwnd)


def _initial_window_from_the_wire(longlook, target, schedule) -> None:
    """The cap of §7.2 against the floor the sender's flight puts on its initial window."""
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        floor = analysis.initial_window_floor(obs.wire)
        if floor is None:
            outcomes.not_exercised("the capture shows no send of the sender's")
        mds = max(d.udp_size for d in obs.wire.datagrams if d.entered and d.direction == "s2c")
        _, high = initial_window_bounds(mds)
        least, t_us, flight, acked = floor
        least -= mds  # the datagram a sender may have in flight above its window
        check(least <= high, "initial-window-too-large",
              f"{target.id}: initial window at least {least} B (derived from the wire: at t={t_us / 1e6:.4f} s, "
              f"{flight} B were in flight, less {acked} B the packets acknowledged so far could have added "
              f"({analysis.GROWTH_PER_PACKET} B each at most) and one {mds} B datagram), above "
              f"{high} B, min(10 × {mds}, max({IW_CAP}, 2 × {mds})) for its largest datagram",
              window=least, over_cap=least / high)


#: How many round trips of slow start are judged, from the flight first reaching the
#: window: early enough that a clean one-BDP link has built no queue for HyStart++ to
#: react to.
GROWTH_RTTS = 2
#: The least growth per byte acknowledged that still is slow start: RFC 9406's
#: conservative slow start grows by a quarter of it (CSS_GROWTH_DIVISOR 4).
MIN_GROWTH_PER_BYTE = 1 / 4


@example(schedule=strategies.CLEAN_DEEP_LINK)
@given(schedule=st.just(strategies.CLEAN_LINK))
def test_a_connection_begins_in_slow_start(longlook, target, schedule):
    """RFC 9438 §4.10: "CUBIC MUST employ a slow-start algorithm, when cwnd is no more
    than ssthresh"; RFC 9002 §7.3.1: "QUIC begins every connection in slow start".
    Over the first round trips (GROWTH_RTTS) after the sender's flight first reaches
    its window, ended early by a declared loss or an exit from slow start, it grows
    the window by at least a quarter of the bytes newly acknowledged (the slowest
    growth RFC 9406 allows), less one datagram. Congestion avoidance from the start
    grows it by about a datagram per round trip. Trigger: the flight reached the
    window and at least four datagrams were acknowledged after."""
    if target.cc.family not in BETA:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no slow start rule here")
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        # The start: the first time the flight reaches the window (the window carried
        # from the last record that logged it). Before that the sender is not
        # cwnd-limited, and RFC 9002 §7.8 lets it not grow.
        cwnd, start, before = None, None, None
        for m in trace.of(Metrics):
            cwnd = m.congestion_window if m.congestion_window is not None else cwnd
            if cwnd is not None and m.bytes_in_flight is not None and m.bytes_in_flight >= cwnd - 2 * mss:
                start, before = m.t_us, cwnd
                break
        if start is None:
            outcomes.not_exercised("the sender's flight never reached its logged window")
        end = start + GROWTH_RTTS * 2 * schedule.phases[0].s2c.delay_us
        ends = [l.t_us for l in analysis.losses(trace) if l.t_us > start]
        ends += [st_.t_us for st_ in analysis.states(trace, BETA[target.cc.family])
                 if st_.t_us > start and st_.state in EXITS]
        end = min([end, *ends])
        inside = [m.congestion_window for m in trace.of(Metrics)
                  if start <= m.t_us <= end and m.congestion_window is not None]
        try:
            acked = analysis.bytes_newly_acknowledged(obs.wire, start, end)
        except Inconclusive as e:
            outcomes.not_exercised(f"the capture could not be read for the bytes acknowledged: {e}")
        if acked < 4 * mss:
            outcomes.not_exercised(f"under 4 datagrams acknowledged in the {(end - start) / 1e3:.0f} ms after the "
                                   "flight first reached the window")
        grown = max(inside, default=before) - before
        check(grown >= MIN_GROWTH_PER_BYTE * acked - mss, "no-slow-start", lambda: (
            f"{target.id}: from t={start / 1e6:.4f} s to {end / 1e6:.4f} s the window grew by {grown} B "
            f"(from {before} B) while {acked} B of data were newly acknowledged, the flight having reached the window: "
            f"slow start grows it by about the bytes acknowledged, at least a quarter of them (RFC 9406)"
        ), growth_per_byte=grown / acked)


#: RFC 9406 §4.3: "The minimum value of CSS_GROWTH_DIVISOR MUST be at least 2."
MIN_CSS_GROWTH_DIVISOR = 2
#: The raw state name of conservative slow start, as the stacks that log it write it.
CSS = "conservative_slow_start"
CSS_PLAN = TransferPlan(sizes=(4_000_000,))


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
    if target.cc.family not in BETA:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no slow start rule here")
    outcomes.require(target, "conservative_slow_start")
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
    if target.cc.family not in BETA:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no slow start rule here")
    outcomes.require(target, "conservative_slow_start")
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


#: RFC 9406's largest RttThresh (MAX_RTT_THRESH), µs: a queue risen by this much has
#: raised every round's minimum RTT past the threshold, whatever the round trip.
MAX_RTT_THRESH_US = 16_000
#: Round trips a delay-based exit may take after that rise: the round that sees it
#: (N_RTT_SAMPLE samples in), and CSS_ROUNDS of conservative slow start at most before
#: the exit to congestion avoidance; the first stretch of conservative slow start
#: counts as the exit.
DELAY_EXIT_RTTS = 3


def growth_slowed_at(obs, trace, t_from_us: float, t_to_us: float, span_us: float) -> float | None:
    """The start of the first span of `span_us` from `t_from_us` in which the window
    grew by at most half the bytes newly acknowledged on the wire (at least four
    datagrams of them): conservative slow start (RFC 9406 §4.2) or congestion
    avoidance, where the log names neither (tquic)."""
    series = analysis.cwnd_series(trace)
    mss = analysis.max_datagram(trace)

    def window_at(t: float) -> int | None:
        return next((w for s, w, *_ in reversed(series) if s <= t), None)

    t = max(t_from_us, series[0][0]) if series else t_to_us
    while t + span_us <= t_to_us:
        w0, w1 = window_at(t), window_at(t + span_us)
        try:
            acked = analysis.bytes_newly_acknowledged(obs.wire, t, t + span_us)
        except Inconclusive:
            return None
        if w0 is not None and w1 is not None and acked >= 4 * mss and w1 - w0 <= acked / 2:
            return t
        t += span_us
    return None


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
