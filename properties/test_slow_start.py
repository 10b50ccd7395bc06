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
from harness.schedule.strategies import BaseLink
from harness.verdict import analysis, growth, outcomes
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
        ends = [l.t_us for l in analysis.losses(trace)]
        ends += [st_.t_us for st_ in analysis.states(trace, BETA[target.cc.family]) if st_.state in EXITS]
        stretch = growth.initial_slow_start(obs, trace, GROWTH_RTTS * 2 * schedule.phases[0].s2c.delay_us, ends, mss)
        if isinstance(stretch, str):
            outcomes.not_exercised(stretch)
        grown, acked = stretch.grown, stretch.acked
        check(grown >= MIN_GROWTH_PER_BYTE * acked - mss, "no-slow-start", lambda: (
            f"{target.id}: from t={stretch.start_us / 1e6:.4f} s to {stretch.end_us / 1e6:.4f} s the window grew by "
            f"{grown} B (from {stretch.before} B) while {acked} B of data were newly acknowledged, the flight having "
            f"reached the window: slow start grows it by about the bytes acknowledged, at least a quarter of them "
            f"(RFC 9406)"
        ), growth_per_byte=stretch.per_byte)


#: The least growth per byte acknowledged that is RFC 9002's slow start, where the
#: rule is "increases by the number of bytes acknowledged": the rest is the suite's
#: allowance for what the two sides count differently (the capture counts a packet's
#: bytes as sent, a stack may count its payload). Measured: see BENCHMARKS.md ("Slow
#: start by the bytes acknowledged").
EXACT_GROWTH_PER_BYTE = 0.85
#: Round trips of slow start judged, from the flight first reaching the window: until
#: a loss, an exit or a standing queue ends them sooner.
EXACT_RTTS = 8
#: The fewest ACKs with the flight at the window that are judged: fewer make a sum
#: that one ACK paired with the wrong log line (two lines showing the same flight)
#: could move past the allowance.
MIN_ACKS = 10
#: An ACK that newly acknowledges this many datagrams or more is a big one: twice
#: what a receiver acknowledging every second datagram sends.
BIG_ACK_DATAGRAMS = 4
#: RFC 9406's conservative slow start is where a HyStart++ sender grows by a quarter:
#: the stretch ends once the bottleneck holds a queue HyStart++ may react to.
CSS = "conservative_slow_start"


def standing_queue_from(records, phase, rtt_us: float) -> float | None:
    """The first arrival at the bottleneck by which every datagram of the round trip
    before met at least MIN_RTT_INCREASE_US of queue: where a round's minimum RTT,
    which HyStart++ compares, has risen by that much. A burst's own queue (ten
    datagrams at 20 Mbit/s queue the last for 4.5 ms) does not raise the minimum."""
    delays = [(r.arr_us, r.delay_us - phase.delay_us - r.size * 8e6 / phase.rate_bps)
              for r in records if r.delay_us is not None]
    low = 0  # the first datagram of the round trip before the one at i
    for i, (t, _) in enumerate(delays):
        while delays[low][0] < t - rtt_us:
            low += 1
        if delays[0][0] <= t - rtt_us and min(q for _, q in delays[low:i + 1]) >= MIN_RTT_INCREASE_US:
            return t
    return None


@example(schedule=strategies.CLEAN_DEEP_LINK)
@example(schedule=strategies.ack_gap(BaseLink(rate_bps=50_000_000), 0, 60, 10))
@given(schedule=strategies.early_ack_gaps())
def test_slow_start_grows_by_the_bytes_acknowledged(longlook, target, schedule):
    """RFC 9002 §7.3.1 (its example algorithm): "While a sender is in slow start, the
    congestion window increases by the number of bytes acknowledged when each
    acknowledgment is processed"; RFC 9406 §4.3: "A paced TCP implementation SHOULD
    use L = infinity" (no cap on the growth per ACK). Over the first GROWTH_RTTS round
    trips after the flight first reaches the window, ended early by a declared loss,
    an exit from slow start, a logged conservative slow start, or the first datagram
    that met MIN_RTT_INCREASE_US of queue at the bottleneck (where HyStart++ may slow
    the growth to a quarter), the window grows by at least EXACT_GROWTH_PER_BYTE of
    the bytes newly acknowledged on the wire, less a datagram, counting only the ACKs
    that reached it while its flight filled its window (growth.cwnd_limited_growth:
    §7.8 lets a sender below its window not grow). A sender that counts half of them,
    or caps what one ACK may add (the drawn ACK gaps make ACKs of many datagrams),
    falls below. Trigger: MIN_ACKS such ACKs in that stretch, every packet they
    acknowledge sent with the window full (a paced sender's seldom are: a rare
    trigger, so draws that miss it count toward the examples)."""
    if target.cc.family not in BETA:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no slow start rule here")
    outcomes.require(target, "congestion_window")
    # A paced sender seldom sends with its window full: most draws judge no ACK.
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        phase = schedule.phases[0].s2c
        ends = [l.t_us for l in analysis.losses(trace)]
        ends += [st_.t_us for st_ in analysis.states(trace, BETA[target.cc.family]) if st_.state in EXITS]
        ends += [s.t_us for s in trace.of(CongestionState) if s.raw == CSS]
        standing = standing_queue_from(obs.transfer_records(), phase, 2 * phase.delay_us)
        ends += [standing] if standing is not None else []
        stretch = growth.initial_slow_start(obs, trace, EXACT_RTTS * 2 * phase.delay_us, ends, mss)
        if isinstance(stretch, str):
            outcomes.not_exercised(stretch)
        limited = growth.cwnd_limited_growth(obs, trace, stretch.start_us, stretch.end_us, mss)
        if limited.acks < MIN_ACKS:
            outcomes.not_exercised(f"{limited.acks} ACKs (under {MIN_ACKS}) reached the sender while its flight filled "
                                   f"its window, from t={stretch.start_us / 1e6:.4f} s to {stretch.end_us / 1e6:.4f} s "
                                   f"of slow start")
        check(limited.grown >= EXACT_GROWTH_PER_BYTE * limited.acked - mss, "slow-start-below-bytes-acked", lambda: (
            f"{target.id}: from t={stretch.start_us / 1e6:.4f} s to {stretch.end_us / 1e6:.4f} s of slow start "
            f"(no loss, no exit, no queue for HyStart++), the {limited.acks} ACKs that reached it while its flight "
            f"filled its window grew the window by {limited.grown} B while they newly acknowledged {limited.acked} B "
            f"of data: {limited.per_byte:.2f} B per byte, where RFC 9002 §7.3.1's slow start adds every byte "
            f"acknowledged"
        ), growth_per_byte=limited.per_byte, acks=limited.acks)
        # One ACK of many datagrams (after an ACK gap) is a small share of the sum: a
        # cap on what one ACK adds shows in those ACKs alone.
        big = limited.of(BIG_ACK_DATAGRAMS * mss)
        check(big.grown >= EXACT_GROWTH_PER_BYTE * big.acked - mss, "slow-start-growth-capped-per-ack", lambda: (
            f"{target.id}: in slow start, the {big.acks} ACKs that each newly acknowledged {BIG_ACK_DATAGRAMS} "
            f"datagrams or more, with the flight at the window, acknowledged {big.acked} B and grew the window by "
            f"{big.grown} B ({big.per_byte:.2f} B per byte; the first at t={big.per_ack[0][0] / 1e6:.4f} s: "
            f"{big.per_ack[0][1]} B acknowledged, {big.per_ack[0][2]} B of growth): what one ACK adds is capped, "
            f"where RFC 9002 §7.3.1's slow start adds every byte acknowledged and RFC 9406 §4.3 has a paced sender "
            f"use L = infinity"
        ), growth_per_byte=big.per_byte, big_acks=big.acks)
