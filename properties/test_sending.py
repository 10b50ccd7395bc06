"""What the sender may put on the wire: the congestion window's limit and PTO probes.

RFC 9002 §7: "An endpoint MUST NOT send a packet if it would cause bytes_in_flight
[...] to be larger than the congestion window, unless the packet is sent on a PTO
timer expiration [...] or when entering recovery."
RFC 9002 §6.2.4: "All probe packets sent on a PTO MUST be ack-eliciting", and "An
endpoint MAY send up to two full-sized datagrams containing ack-eliciting packets"
when the PTO timer expires.

The window is judged on the sender's own account (its logged bytes_in_flight after
each send against its logged window; test_bytes_in_flight_match_the_wire judges that
account against the decrypted capture). Probes are read off the wire: a probe is
timer-driven, so it follows a silence of at least an RTT with no acknowledgement with
news reaching the sender.
"""

from __future__ import annotations

import bisect

from hypothesis import example, given
from hypothesis import strategies as st

from harness.observe.events import Metrics, PacketAcked, PacketSent
from harness.schedule import TransferPlan, strategies
from harness.schedule.strategies import BaseLink
from harness.verdict import analysis, outcomes
from harness.verdict.blackhole import hit_the_transfer, probe_datagrams, quiet_period
from harness.verdict.deviation import check
from harness.verdict.idle_probes import idle_probe_bursts

PLAN = TransferPlan(sizes=(1_000_000,))
#: Long enough that a blackhole drawn by long_blackholes() falls inside the transfer.
DARK_PLAN = TransferPlan(sizes=(2_000_000,))
#: Stacks log a send's metrics and the window it was sent under microseconds apart,
#: in either order: events this close are taken as simultaneous (µs).
ORDER_SLACK_US = 1_000
#: A PTO is longer than the smoothed RTT (§6.2.1), itself about the path's minimum
#: RTT: a send after this share of it without any news is timer-driven.
PROBE_SILENCE_RTT = 0.9
#: §6.2.4: datagrams with ack-eliciting packets per PTO expiry.
MAX_PROBE_DATAGRAMS = 2


def _min_rtt_us(trace, schedule) -> float:
    """The path's round trip as the sender measured it (its lowest sample), else
    the schedule's base RTT."""
    samples = [m.min_rtt_us or m.latest_rtt_us for m in trace.of(Metrics) if (m.min_rtt_us or m.latest_rtt_us)]
    base = 2 * (schedule.phases[0].s2c.delay_us or 0)
    return min(samples) if samples else base


def _timer_driven(sends: list[float], news: list[float], silence_us: float) -> list[tuple[float, float]]:
    """[start, end] of each stretch of sends begun after `silence_us` without a send
    or an acknowledgement with news: a PTO's probes. A stretch ends at the next
    acknowledgement with news or the next silence of half that length."""
    out: list[tuple[float, float]] = []
    prev = float("-inf")
    for t in sends:
        ack_before = news[bisect.bisect_left(news, t) - 1] if bisect.bisect_left(news, t) else float("-inf")
        if out and t - out[-1][1] <= silence_us / 2 and ack_before <= out[-1][0]:
            out[-1] = (out[-1][0], t)
        elif t - prev >= silence_us and ack_before <= prev:
            out.append((t, t))
        prev = t
    return out


@example(schedule=strategies.CLEAN_LINK)
@example(schedule=strategies.dark(BaseLink(), 0, 600, 1500))
@given(schedule=st.one_of(strategies.loss_only(), strategies.blackholes()))
def test_no_send_beyond_congestion_window(longlook, target, schedule):
    """RFC 9002 §7: after each application-space send, the sender's bytes in flight
    are at most its congestion window (the largest it logged within ±1 ms of the
    send) plus one datagram (the packet §7.3.2 lets it send on entering recovery),
    except for the probes of a PTO. Trigger: the window limited the sender at least
    once (bytes in flight within two datagrams of it)."""
    outcomes.require(target, "bytes_in_flight")
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, DARK_PLAN if len(schedule.phases) > 1 else PLAN) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        windows = [(m.t_us, m.congestion_window) for m in trace.of(Metrics) if m.congestion_window is not None]
        if not windows:
            outcomes.not_exercised("the sender's log holds no congestion window in this run")
        view = obs.wire
        news = analysis.new_ack_arrivals(view)
        if not news:
            outcomes.not_exercised("no acknowledgement reached the sender")
        sends = _sends(trace, _eliciting_pns(view))
        probes = _timer_driven(sorted(t for t, _, _ in sends), news, PROBE_SILENCE_RTT * _min_rtt_us(trace, schedule))
        starts = [a for a, _ in probes]
        # PRR (§7.3.2 allows it) lowers the window gradually: during a recovery
        # period the sender may keep what was in flight when it began.
        recoveries = _recoveries(trace, view)
        rstarts = [a for a, _, _ in recoveries]
        times = [t for t, _ in windows]
        # A stack whose threads log apart (kwik: a send thread that read the window
        # before the receive thread cut it) is held to the largest window it logged
        # within its log-order slack before the send, too.
        back = analysis.log_order_slack_us(target, ORDER_SLACK_US) - ORDER_SLACK_US
        limited, checked, over = 0, 0, []
        for t, inflight, pn in sends:
            if t < news[0]:
                continue  # the handshake: stacks differ in when its packets leave the flight
            i = bisect.bisect_right(times, t) - 1
            lo = min(max(i, 0), bisect.bisect_left(times, t - back)) if back else max(i, 0)
            near = [c for _, c in windows[lo:bisect.bisect_right(times, t + ORDER_SLACK_US)]]
            if i >= 0:
                near.append(windows[i][1])
            if not near:
                continue
            cwnd = max(near)
            checked += 1
            limited += inflight >= cwnd - 2 * mss
            k = bisect.bisect_right(starts, t) - 1
            probe = k >= 0 and probes[k][0] <= t <= probes[k][1]
            r = bisect.bisect_right(rstarts, t) - 1
            if r >= 0 and recoveries[r][0] <= t < recoveries[r][1]:
                cwnd = max(cwnd, recoveries[r][2])
            if inflight > cwnd + mss and not probe:
                over.append((t, pn, inflight, cwnd))
        if not limited:
            outcomes.not_exercised(f"the window never limited the sender ({checked} sends checked)")
        worst = max(over, key=lambda o: o[2] - o[3], default=None)
        check(not over, "beyond-cwnd", lambda: (
            f"{target.id}: {len(over)} of {checked} sends left more bytes in flight than the congestion window "
            f"plus one datagram ({mss} B), outside any PTO probe; worst: pn {worst[1]} at t={worst[0] / 1e6:.4f} s "
            f"left {worst[2]} B in flight under a window of {worst[3]} B (×{worst[2] / worst[3]:.2f})"
        ), over_share=len(over) / max(checked, 1), excess_datagrams=(worst[2] - worst[3]) / mss if worst else 0.0)


def _eliciting_pns(view) -> set[int]:
    """Application-space packet numbers of the sender's ack-eliciting packets on the
    wire (stacks whose qlog does not say which packets elicit ACKs: quinn)."""
    return {p.pn for d in view.datagrams if d.entered and d.direction == "s2c"
            for p in d.packets if p.space == "application" and p.pn is not None and p.ack_eliciting}


def _first_acks(trace, view) -> dict[int, float]:
    """Application-space packet number → when the sender first learnt it was
    acknowledged: from its own log, or, where that has no ACK frames (quinn), from
    the ACK frames reaching it on the wire."""
    logged = [a for a in trace.of(PacketAcked) if a.space == "application"]
    if logged:
        out: dict[int, float] = {}
        for a in logged:
            out.setdefault(a.pn, a.t_us)
        return out
    unacked = sorted(_eliciting_pns(view) | {p.pn for d in view.datagrams if d.entered and d.direction == "s2c"
                                             for p in d.packets if p.space == "application" and p.pn is not None})
    out = {}
    for d in view.datagrams:
        if d.entered or d.direction != "c2s":
            continue
        for p in d.packets:
            for f in p.frames:
                if p.space != "application" or getattr(f, "name", "") != "ack":
                    continue
                for low, high in f.ranges:
                    i, k = bisect.bisect_left(unacked, low), bisect.bisect_right(unacked, high)
                    for pn in unacked[i:k]:
                        out[pn] = d.t_us
                    del unacked[i:k]
    return out


def _recoveries(trace, view) -> list[tuple[float, float, int]]:
    """(start, end, bytes in flight at the start) of each recovery period (§7.3.2):
    from a window reduction until a packet sent after it is acknowledged."""
    sent = sorted((p.t_us, p.pn) for p in trace.of(PacketSent) if p.space == "application")
    acks = _first_acks(trace, view)
    reports = [(m.t_us, m.bytes_in_flight) for m in trace.of(Metrics) if m.bytes_in_flight is not None]
    out = []
    for cut in analysis.reductions(trace):
        if out and cut.t_us <= out[-1][1]:
            continue
        later = [acks[pn] for t, pn in sent[bisect.bisect_left(sent, (cut.t_us, -1)):] if pn in acks]
        flight = max((b for t, b in reports if abs(t - cut.t_us) <= ORDER_SLACK_US), default=0)
        out.append((cut.t_us, min(later, default=float("inf")), flight))
    return out


def _sends(trace, eliciting: set[int]):
    """(t_us, bytes in flight the sender reported right after it, pn) of each
    application-space packet it sent that counts in flight (ack-eliciting on the
    wire): the first bytes_in_flight it logged at the send's instant
    (±ORDER_SLACK_US), before its next send."""
    out = []
    pending: PacketSent | None = None
    for e in trace.events:
        if isinstance(e, PacketSent):
            pending = e if e.space == "application" and e.pn in eliciting else None
        elif isinstance(e, Metrics) and pending is not None and e.bytes_in_flight is not None:
            if abs(e.t_us - pending.t_us) <= ORDER_SLACK_US:
                out.append((pending.t_us, e.bytes_in_flight, pending.pn))
            pending = None
    return out


@example(schedule=strategies.dark(BaseLink(), 0, 600, 2000))
@given(schedule=st.one_of(strategies.long_blackholes(), strategies.blackholes()))
def test_probes_are_ack_eliciting(longlook, target, schedule):
    """RFC 9002 §6.2.4: every packet the sender's timers send during a blackhole of
    the data direction (after the last acknowledgement with news, and not within
    30 ms of a client datagram, which it may be acknowledging) is ack-eliciting.
    Trigger: the blackhole hit the transfer under way, and the sender's timers sent
    at least one such datagram."""
    with longlook.run(target, schedule, DARK_PLAN, timeout_s=60) as obs:
        hit_the_transfer(obs, schedule)
        probes, quiet_from = probe_datagrams(obs, schedule)
        if not probes:
            outcomes.not_exercised("the sender's timers sent nothing during the blackhole")
        bad = [(d, p) for d in probes for p in d.packets if not p.ack_eliciting]
        first = bad[0] if bad else None
        check(not bad, "probe-not-ack-eliciting", lambda: (
            f"{target.id}: {len(bad)} of the {sum(len(d.packets) for d in probes)} packets the sender's timers sent "
            f"during the blackhole are not ack-eliciting; first: {first[1].space} pn {first[1].pn} at "
            f"+{(first[0].t_us - quiet_from) / 1e3:.0f} ms after the last news, frames "
            f"{[getattr(f, 'name', '?') for f in first[1].frames][:6]}"
        ), non_eliciting=len(bad))
        # Judged after the probes: a sender whose probes elicit nothing may never recover.
        obs.completed()


@example(schedule=strategies.dark(BaseLink(), 0, 600, 2000))
@given(schedule=st.one_of(strategies.long_blackholes(), strategies.blackholes()))
def test_probe_bursts_are_at_most_two_datagrams(longlook, target, schedule):
    """RFC 9002 §6.2.4: each PTO expiry during a blackhole sends at most two datagrams
    with ack-eliciting packets. A burst is the ack-eliciting datagrams sent after a
    silence of at least an RTT with no acknowledgement with news, until the next such
    burst, the next acknowledgement with news, or an RTT later (a pacer may space
    them). Trigger: the blackhole hit the transfer under way, and at least one probe
    burst."""
    rtt_us = 2 * schedule.phases[0].s2c.delay_us
    with longlook.run(target, schedule, DARK_PLAN, timeout_s=60) as obs:
        obs.completed()
        hit_the_transfer(obs, schedule)
        view = obs.wire
        quiet_from, quiet_to = quiet_period(obs, schedule)
        # Every ack-eliciting send of the run, so that a burst's silence before it
        # counts the sends before the dark too; those of the quiet period are judged.
        eliciting_datagrams = [d for d in view.datagrams if d.entered and d.direction == "s2c"
                               and any(p.ack_eliciting for p in d.packets)]
        eliciting = [d.t_us for d in eliciting_datagrams]
        silence = PROBE_SILENCE_RTT * min(_min_rtt_us(obs.sender, schedule), rtt_us)
        news = analysis.new_ack_arrivals(view)
        starts = [a for a, _ in _timer_driven(eliciting, news, silence)]
        # One PTO expiry's datagrams: from the burst's first until the next burst, the
        # next news, or one silence later (a pacer may space them).
        bursts = []
        for a, nxt in zip(starts, [*starts[1:], float("inf")]):
            if quiet_from < a < quiet_to:
                end = min(nxt, a + silence, min((t for t in news if t > a), default=float("inf")))
                bursts.append((a, max(t for t in eliciting if a <= t < end)))
        counts = [bisect.bisect_right(eliciting, b) - bisect.bisect_left(eliciting, a) for a, b in bursts]
        if not bursts:
            outcomes.not_exercised("no probe burst during the blackhole")
        worst = max(range(len(bursts)), key=lambda i: counts[i])
        first = bisect.bisect_left(eliciting, bursts[worst][0])
        # The burst's UDP payload bytes: the count is what §6.2.4 bounds, the bytes tell
        # an implementer whether the datagrams were full-sized or one datagram's worth split.
        size = sum(d.udp_size for d in eliciting_datagrams[first:first + counts[worst]])
        check(counts[worst] <= MAX_PROBE_DATAGRAMS, "probe-burst-too-long", lambda: (
            f"{target.id}: a PTO probe burst at +{(bursts[worst][0] - quiet_from) / 1e3:.0f} ms after the last "
            f"news held {counts[worst]} datagrams with ack-eliciting packets ({size} B of UDP payload) over "
            f"{(bursts[worst][1] - bursts[worst][0]) / 1e3:.1f} ms (bursts: {counts[:12]}); §6.2.4 allows "
            f"{MAX_PROBE_DATAGRAMS}"
        ), datagrams=counts[worst], bytes=size)


#: RFC 9002 §6.2.4's example: a small first object, then a pause that outlasts the
#: outage and its probe timeouts before the second is asked for.
IDLE_PROBE_PLAN = TransferPlan(sizes=(4_000, 40_000), testcase="appidle", think_ms=4_000)


@example(schedule=strategies.first_object_late(BaseLink(), 0, 300, 1000))
@given(schedule=strategies.first_objects_late())
def test_probes_with_nothing_to_send_are_one_packet(longlook, target, schedule):
    """RFC 9002 §6.2.4: "When there is no data to send, the sender SHOULD send a PING
    or other ack-eliciting frame in a single packet, re-arming the PTO timer." The
    first object's datagrams arrive hundreds of milliseconds late while the data
    direction is dark (first_object_late), so the sender's probes retransmit the data
    into the dark, and then the late originals are acknowledged: its probes are in
    flight with nothing left to send. Each burst of ack-eliciting datagrams it then
    sends carrying no new data (idle_probes.idle_probe_bursts: an expiry's datagrams,
    less than a round trip apart with no acknowledgement with news between) must be
    one datagram. Trigger: such a burst. The schedule's phases are timed from the
    link's start, which a virtual clock shares with the client; in real time the
    client starts tens of milliseconds later, so whether the first object's datagrams
    fall in the late phase depends on the stack's start-up: a rare trigger there."""
    with outcomes.rare_trigger(), longlook.run(target, schedule, IDLE_PROBE_PLAN, timeout_s=60) as obs:
        obs.completed()
        view = obs.wire
        conn = analysis.busiest_connection(view)
        rtt_us = 2 * schedule.phases[0].s2c.delay_us
        bursts = idle_probe_bursts(view, conn, PROBE_SILENCE_RTT * min(_min_rtt_us(obs.sender, schedule), rtt_us))
        if not bursts:
            outcomes.not_exercised("the sender sent nothing ack-eliciting while every byte it had sent was "
                                   "acknowledged (no probe timeout with nothing to send)")
        worst = max(bursts, key=lambda b: b.datagrams)
        check(worst.datagrams <= 1, "idle-probe-not-single", lambda: (
            f"{target.id}: with every STREAM byte it had sent acknowledged, a probe at t={worst.first_us / 1e6:.3f} s "
            f"took {worst.datagrams} datagrams ({worst.describe()}); of {len(bursts)} such probe(s), the sizes "
            f"were {[b.datagrams for b in bursts][:12]} (RFC 9002 §6.2.4: with no data to send, a PING or other "
            f"ack-eliciting frame in a single packet)"
        ), datagrams=worst.datagrams, probes=len(bursts))
