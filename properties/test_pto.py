"""The probe timeout: it backs off exponentially, its first period is the one RFC 9002
§6.2.1 computes from the sender's estimates, and its expiry declares no loss (§6.2).

RFC 9002 §6.2.1: "When a PTO timer expires, the PTO backoff MUST be increased,
resulting in the PTO period being set to twice its current value." The timer is
re-armed from the last ack-eliciting packet sent (the probe), so while nothing is
acknowledged the gaps between successive probe bursts double.

Read off the wire (the sender side's decrypted capture), not a stack's timer log:
during a blackhole of the data direction nothing reaches the client, so once the last
acknowledgement with news has reached the sender, every ack-eliciting datagram it
emits is a timer-driven probe. ACK-only datagrams (answers to the client's own
probes) are not probes and are left out.
"""

from __future__ import annotations

import bisect
import itertools

from hypothesis import example, given
from hypothesis import strategies as st

from harness.observe.events import Metrics, PacketSent
from harness.observe.quic_frames import NOT_ACK_ELICITING
from harness.rfc import K_GRANULARITY_US
from harness.schedule import TransferPlan, handshake, strategies
from harness.schedule.strategies import BaseLink
from harness.verdict import analysis, outcomes
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(4_000_000,))
DARK_PLAN = TransferPlan(sizes=(2_000_000,))
#: Each timeout's gap over the previous one: 2 (§6.2.1), with a margin for timer
#: granularity and the probe's own pacing (a few ms against gaps ≥ 100 ms).
BACKOFF_LOW, BACKOFF_HIGH = 1.6, 2.5


@example(schedule=strategies.dark(BaseLink(), 0, 600, 2000))
@given(schedule=strategies.long_blackholes())
def test_pto_backs_off_exponentially(longlook, target, schedule):
    """Successive PTO probe bursts during a blackhole are spaced by doubling gaps."""
    dark_from, dark_to = schedule.phases[1].start_us, schedule.phases[2].start_us
    rtt_us = 2 * schedule.phases[0].s2c.delay_us
    with longlook.run(target, schedule, PLAN, timeout_s=60) as obs:
        obs.completed()
        view = obs.wire
        sent = analysis.ack_eliciting_sends(view)
        # The transfer must have been under way when the link went dark.
        if not (any(t < dark_from for t in sent) and any(t >= dark_to for t in sent)):
            outcomes.not_exercised("the transfer was not sending both before the link went dark and after it "
                                   "came back")
        # Acknowledgements of data delivered before the dark still reach the sender
        # and let it send more; probes start after the last one. (The client's own
        # probes keep arriving during the dark, with nothing new in their ACKs.)
        quiet_from = max((t for t in analysis.new_ack_arrivals(view) if t < dark_to), default=dark_from)
        # A probe timeout exceeds the RTT, and one timeout's datagrams leave together:
        # half an RTT separates bursts without splitting one.
        probes = analysis.bursts([t for t in sent if quiet_from < t < dark_to], rtt_us / 2)
        ends = [last for _, last, _ in probes]
        listing = ", ".join(f"{(e - dark_from) / 1e3:.0f}" for e in ends[:10])
        check(len(probes) >= 2, "too-few-probes", (
            f"{target.id}: {len(probes)} probe bursts during a {(dark_to - dark_from) / 1e3:.0f} ms blackhole "
            f"(from the last acknowledgement at +{(quiet_from - dark_from) / 1e3:.0f} ms); "
            f"a PTO is at most a few RTTs ({rtt_us / 1e3:.0f} ms) long"
        ), probes=len(probes))
        gaps = [b - a for a, b in zip(ends, ends[1:])]
        for k, (g0, g1) in enumerate(zip(gaps, gaps[1:])):
            ratio = g1 / g0
            check(BACKOFF_LOW <= ratio <= BACKOFF_HIGH, "pto-backoff", (
                f"{target.id}: probe bursts at +[{listing}] ms into the blackhole: gap {k + 2} is "
                f"{g1 / 1e3:.0f} ms after a gap of {g0 / 1e3:.0f} ms (×{ratio:.2f}); §6.2.1 doubles the PTO "
                f"at each timeout (accepted ×{BACKOFF_LOW}…×{BACKOFF_HIGH})"
            ), ratio=ratio)


#: Stacks log an ACK's arrival and the losses it declares microseconds apart, in
#: either order (µs).
ORDER_SLACK_US = 1_000


def declared_by_a_timer_with_data_to_send(trace, view) -> list[tuple]:
    """(loss, when the sender next sent an ack-eliciting packet) for each declared
    application loss that only a probe timeout can have declared, while the sender
    had data to send.

    §6.1 declares a packet lost only once a later packet of its space is acknowledged
    (both thresholds count from one), so a loss with no later packet acknowledged by
    then is a timer's. §6.2.4 lets a sender mark packets lost instead of probing only
    when it has no new or previously sent data to send ("When there is no data to
    send, ... Alternatively, instead of sending an ack-eliciting packet, the sender
    MAY mark any packets still in flight as lost"): a sender that sends an
    ack-eliciting packet after the declaration, before any further acknowledgment
    reached it, had data to send and probed, so the declaration was the PTO's."""
    acks = analysis.first_acks(trace, view)
    arrivals = sorted(t for t, _ in acks)
    sends = sorted(p.t_us for p in trace.of(PacketSent) if p.space == "application" and p.ack_eliciting is not False)
    first_lost: dict[int, float] = {}
    for e in sorted((e for e in analysis.losses(trace) if e.space == "application"), key=lambda e: e.t_us):
        first_lost.setdefault(e.pn, e.t_us)
    out = []
    for pn, t in sorted(first_lost.items(), key=lambda kv: kv[1]):
        if any(q > pn and ta <= t + ORDER_SLACK_US for ta, q in acks):
            continue  # §6.1's business (the reordering and time-threshold properties judge how)
        next_ack = arrivals[bisect.bisect_right(arrivals, t + ORDER_SLACK_US)] \
            if bisect.bisect_right(arrivals, t + ORDER_SLACK_US) < len(arrivals) else float("inf")
        k = bisect.bisect_left(sends, t - ORDER_SLACK_US)
        if k < len(sends) and sends[k] < next_ack:
            out.append((pn, t, sends[k]))
    return out


@example(schedule=strategies.dark(BaseLink(), 0, 600, 1500))
@given(schedule=st.one_of(strategies.blackholes(), strategies.long_blackholes()))
def test_a_probe_timeout_declares_no_loss(longlook, target, schedule):
    """RFC 9002 §6.2: "A PTO timer expiration event does not indicate packet loss and
    MUST NOT cause prior unacknowledged packets to be marked as lost." A declared loss
    with no later packet acknowledged is a timer's (§6.1 needs one), allowed by
    §6.2.4 only to a sender with no data to send, instead of a probe: one that sends
    an ack-eliciting packet right after, before any acknowledgment arrives, had data
    and violates the rule. Trigger: a probe timeout expired after the handshake (the
    stack's log, or derived from its probes on the wire where it logs none)."""
    outcomes.require(target, "packet_lost")
    with longlook.run(target, schedule, DARK_PLAN) as obs:
        obs.completed()
        trace, view = obs.sender, obs.wire
        confirmed = analysis.handshake_confirmed_us(view) or 0.0
        expiries = [p for p in analysis.ptos(obs.sender_with_wire) if p.t_us > confirmed]
        bad = declared_by_a_timer_with_data_to_send(trace, view)
        if not expiries and not bad:
            outcomes.not_exercised("no probe timeout expired after the handshake")
        first = bad[0] if bad else None
        check(not bad, "pto-declared-loss", lambda: (
            f"{target.id}: {len(bad)} packets declared lost with no later packet acknowledged, each followed by an "
            f"ack-eliciting send before any acknowledgment ({len(expiries)} PTO expiries seen); first: pn {first[0]} "
            f"declared at t={first[1] / 1e6:.4f} s, next ack-eliciting send at t={first[2] / 1e6:.4f} s"
        ), declared=len(bad), send_after_us=(first[2] - first[1]) if first else 0.0)


#: The first probe's wait over the PTO period the sender's own estimates give:
#: below 1 is a timer armed early or from an older send (§6.2.1 restarts it at each
#: ack-eliciting send); the upper margin allows timer slack and the sender's
#: granularity (a few ms against periods ≥ 20 ms).
PERIOD_LOW, PERIOD_HIGH = 0.85, 1.6


def first_probe_wait(view, quiet_from: float, dark_to: float, expected_us: float):
    """(last ack-eliciting send before the first probe, the probe) on the wire, or None:
    the first probe is the first ack-eliciting send after the last acknowledgment with
    news that follows a silence of at least half the expected period (sends the last
    ACK let out leave at once or paced, well within it)."""
    sends = [t for t in analysis.ack_eliciting_sends(view) if t < dark_to]
    before = [t for t in sends if t <= quiet_from]
    anchor = before[-1] if before else None
    for t in (t for t in sends if t > quiet_from):
        if anchor is not None and t - anchor >= expected_us / 2:
            return anchor, t
        anchor = t
    return None


@example(schedule=strategies.dark(BaseLink(), 0, 600, 1500))
@given(schedule=st.one_of(strategies.blackholes(), strategies.long_blackholes()))
def test_first_probe_waits_one_probe_timeout(longlook, target, schedule):
    """RFC 9002 §6.2.1: "PTO = smoothed_rtt + max(4*rttvar, kGranularity) +
    max_ack_delay" (the example algorithm), and "A sender SHOULD restart its PTO timer
    every time an ack-eliciting packet is sent or acknowledged". When the data
    direction goes dark, the first probe leaves one such period after the sender's
    last ack-eliciting send, from its own last logged smoothed_rtt and rttvar and the
    peer's max_ack_delay: PERIOD_LOW to PERIOD_HIGH of it. Trigger: a silence after
    the last acknowledgment with news, ended by a probe before the link came back."""
    outcomes.require(target, "smoothed_rtt")
    dark_from, dark_to = schedule.phases[1].start_us, schedule.phases[2].start_us
    with longlook.run(target, schedule, DARK_PLAN) as obs:
        obs.completed()
        view, trace = obs.wire, obs.sender
        quiet_from = max((t for t in analysis.new_ack_arrivals(view) if t < dark_to), default=dark_from)
        if quiet_from < dark_from:
            outcomes.not_exercised("the transfer was not under way when the link went dark")
        estimates = [m for m in trace.of(Metrics) if m.smoothed_rtt_us and m.rtt_variance_us is not None
                     and m.t_us <= quiet_from + 1_000]
        if not estimates:
            outcomes.not_exercised("the sender logged no smoothed_rtt with an rttvar before the link went dark")
        m = estimates[-1]
        mad = analysis.max_ack_delay_us(view)
        expected = m.smoothed_rtt_us + max(4 * m.rtt_variance_us, K_GRANULARITY_US) + mad
        found = first_probe_wait(view, quiet_from, dark_to, expected)
        if found is None:
            outcomes.not_exercised(f"no probe before the link came back ({(dark_to - quiet_from) / 1e3:.0f} ms "
                                   f"after the last acknowledgment; expected period {expected / 1e3:.1f} ms)")
        anchor, probe = found
        ratio = (probe - anchor) / expected
        check(PERIOD_LOW <= ratio <= PERIOD_HIGH, "pto-period", (
            f"{target.id}: first probe {(probe - anchor) / 1e3:.1f} ms after the last ack-eliciting send "
            f"(t={anchor / 1e6:.4f} s), where smoothed_rtt {m.smoothed_rtt_us / 1e3:.1f} + max(4 × rttvar "
            f"{m.rtt_variance_us / 1e3:.1f}, 1) + max_ack_delay {mad / 1e3:.1f} = {expected / 1e3:.1f} ms: "
            f"×{ratio:.2f}, outside [{PERIOD_LOW}, {PERIOD_HIGH}]"
        ), ratio=ratio, expected_us=expected)


HANDSHAKE_PLAN = TransferPlan(sizes=(50_000,))
#: A Handshake probe datagram is one the client sent on its own, not in answer to a
#: datagram that reached it this long before (an ACK, or a stack's early resend of
#: CRYPTO data on a duplicate; RFC 9002 §6.2.3).
ANSWER_US = 2_000
#: The first Handshake probe's wait over the period without max_ack_delay. Below 1.45
#: a period that adds max_ack_delay (25 ms on paths of 6–10 ms, where the period is
#: 18–33 ms) is never mistaken for one that does not.
HANDSHAKE_LOW, HANDSHAKE_HIGH = 0.85, 1.45


def handshake_probe_wait(view, period_at) -> tuple[float, float] | None:
    """(the client's last ack-eliciting Initial or Handshake send before its first probe
    in those spaces, that probe) on the client's wire, or None when it sent none. A
    probe is a send of its own (not an answer) after a silence of at least half the
    period `period_at(t)` in force: datagrams of one flight leave together."""
    arrivals = [d.t_us for d in view.datagrams if not d.entered and d.direction == "s2c"]
    anchor = None
    for d in view.datagrams:
        if not (d.entered and d.direction == "c2s"
                and any(p.space in ("initial", "handshake") and p.ack_eliciting for p in d.packets)):
            continue
        answered = bisect.bisect_right(arrivals, d.t_us) - bisect.bisect_left(arrivals, d.t_us - ANSWER_US) > 0
        if anchor is not None and not answered and d.t_us - anchor >= period_at(d.t_us) / 2:
            return anchor, d.t_us
        anchor = d.t_us
    return None


@example(schedule=handshake.handshake_held_back(BaseLink(rtt_us=10_000), 0, 6))
@given(schedule=handshake.handshake_losses())
def test_handshake_probes_leave_max_ack_delay_out(longlook, target, schedule):
    """RFC 9002 §6.2.1: "When the PTO is armed for Initial or Handshake packet number
    spaces, the max_ack_delay in the PTO period computation is set to 0, since the
    peer is expected to not delay these packets intentionally" (the example
    algorithm). The client's datagrams after its first are dropped until it probes;
    its first Initial or Handshake probe leaves smoothed_rtt + max(4*rttvar,
    kGranularity) after its last send in those spaces, from the estimate it logged
    last before the probe (the timer is re-armed when an ACK updates it), without the
    server's max_ack_delay: HANDSHAKE_LOW to HANDSHAKE_HIGH of it. Judged on the
    target's client (in a download without a peer it is the target's stack).
    Trigger: such a probe."""
    outcomes.require_own_client(target)
    outcomes.require(target, "smoothed_rtt")
    # Whether a client logs rttvar with its estimate (picoquic does not) or probes on its
    # own before an answer comes is the stack's habit more than the schedule's: an
    # example that shows neither counts toward max_examples instead of a hunt.
    with outcomes.rare_trigger(), longlook.run(target, schedule, HANDSHAKE_PLAN) as obs:
        obs.completed()
        view = obs.client_wire
        estimates = [m for m in obs.client.of(Metrics) if m.smoothed_rtt_us and m.rtt_variance_us is not None]
        if not estimates:
            outcomes.not_exercised("the client logged no smoothed_rtt with an rttvar")

        def estimate_at(t_us: float) -> Metrics:
            return next((m for m in reversed(estimates) if m.t_us <= t_us), estimates[0])

        def period_at(t_us: float) -> float:
            m = estimate_at(t_us)
            return m.smoothed_rtt_us + max(4 * m.rtt_variance_us, K_GRANULARITY_US)

        found = handshake_probe_wait(view, period_at)
        if found is None:
            outcomes.not_exercised("the client sent no Initial or Handshake probe of its own")
        anchor, probe = found
        m, expected = estimate_at(probe), period_at(probe)
        mad = analysis.max_ack_delay_us(view, "s2c")
        ratio = (probe - anchor) / expected
        check(HANDSHAKE_LOW <= ratio <= HANDSHAKE_HIGH, "handshake-pto-period", (
            f"{target.id}: the client's first Initial/Handshake probe left {(probe - anchor) / 1e3:.1f} ms after "
            f"its last send in those spaces (t={anchor / 1e6:.4f} s), where smoothed_rtt {m.smoothed_rtt_us / 1e3:.1f} + "
            f"max(4 × rttvar {m.rtt_variance_us / 1e3:.1f}, 1) = {expected / 1e3:.1f} ms: ×{ratio:.2f}, outside "
            f"[{HANDSHAKE_LOW}, {HANDSHAKE_HIGH}]" + (f"; with the server's max_ack_delay {mad / 1e3:.0f} ms it would "
                                                       f"be ×{(expected + mad) / expected:.2f}" if mad else "")
        ), ratio=ratio, expected_us=expected)


#: RFC 9000 §8.1: before the client's address is validated, a server sends at most
#: this many times the bytes it has received.
AMPLIFICATION_FACTOR = 3
#: A full-sized datagram of the handshake (RFC 9000 §14.1's minimum): a server this
#: close to its limit cannot send another one, so the limit bound it.
FULL_DATAGRAM = 1200


@example(schedule=handshake.handshake_delayed(BaseLink(rtt_us=10_000), 0, 3_000))
@given(schedule=handshake.handshake_delays())
def test_server_stays_within_the_amplification_limit(longlook, target, schedule):
    """RFC 9002 §6.2.2.1: "If no additional data can be sent, the server's PTO timer
    MUST NOT be armed until datagrams have been received from the client", and the
    limit behind it, RFC 9000 §8.1: until the client's address is validated (a
    Handshake packet from it arrives), the server sends at most three times the UDP
    payload bytes it has received. The client's datagrams after its first Initial are
    held back for seconds, so the server's retransmissions of its first flight run
    into the limit; a probe sent past it is what an armed timer at the limit shows on
    the wire. Read
    off the server side's capture: each datagram the server sent before validation,
    against the client datagrams that had reached it by then. Trigger: the server
    came within one full-sized datagram of its limit before validation."""
    if target.direction != "download":
        outcomes.not_applicable("judged on the target's server, which sends the download's data")
    # Whether a server retransmits its first flight up to its limit at all is its habit
    # more than the schedule's (quiche's waits for the client): an example that does
    # not show it counts toward max_examples instead of a hunt through hundreds.
    with outcomes.rare_trigger(), longlook.run(target, schedule, HANDSHAKE_PLAN) as obs:
        obs.completed()
        view = obs.wire
        arrivals = sorted((d.t_us, d.udp_size, any(p.space == "handshake" for p in d.packets))
                          for d in view.datagrams if not d.entered and d.direction == "c2s")
        validated = next((t for t, _, handshake in arrivals if handshake), float("inf"))
        sends = sorted((d.t_us, d.udp_size) for d in view.datagrams
                       if d.entered and d.direction == "s2c" and d.t_us < validated)
        times = [t for t, _, _ in arrivals]
        totals = [0, *itertools.accumulate(size for _, size, _ in arrivals)]  # [i]: bytes of the first i arrivals
        sent, closest, over = 0, float("inf"), []
        for t, size in sends:
            sent += size
            limit = AMPLIFICATION_FACTOR * totals[bisect.bisect_right(times, t)]
            closest = min(closest, limit - sent)
            if sent > limit:
                over.append((t, sent, limit))
        if closest >= FULL_DATAGRAM:
            outcomes.not_exercised(f"the server never came within a datagram of its amplification limit before the "
                                   f"client's address was validated (closest: {closest:.0f} B below it)")
        first = over[0] if over else None
        check(not over, "amplification-limit-exceeded", lambda: (
            f"{target.id}: {len(over)} datagrams the server sent before the client's address was validated took it "
            f"past three times the bytes it had received; first at t={first[0] / 1e6:.4f} s: {first[1]} B sent "
            f"against {first[2] // AMPLIFICATION_FACTOR} B received (limit {first[2]} B)"
        ), over=len(over), excess_bytes=max((s - lim for _, s, lim in over), default=0))


#: A client datagram is its own timer's (a probe) when no server datagram reached the
#: client, and the client sent nothing, for this long before it: a client answers a
#: server flight (its Finished, then its request) within a few ms, and its handshake
#: PTO is at least an RTT plus 4 × rttvar (µs).
CLIENT_PROBE_QUIET_US = 20_000
#: The datagrams one timer expiry sends leave together: those within this of a probe's
#: first datagram are its too (µs).
CLIENT_PROBE_BURST_US = 5_000


def first_request(sends) -> int | None:
    """Index of the client's first datagram that carries STREAM data, when all its
    ack-eliciting content is 1-RTT STREAM frames starting at offset 0: its request,
    which a slow client can send more than CLIENT_PROBE_QUIET_US after the server's
    flight, and which no timer sent. Only that one datagram: any later send of new
    data before confirmation may be a probe, and is judged as one."""
    for k, d in enumerate(sends):
        frames = [f for p in d.packets if p.ack_eliciting for f in p.frames
                  if getattr(f, "name", "") not in NOT_ACK_ELICITING]
        streams = [f for f in frames if getattr(f, "name", "") == "stream"]
        if not streams:
            continue
        only_request = len(streams) == len(frames) and all(f.offset == 0 for f in streams) and all(
            p.space == "application" for p in d.packets if p.ack_eliciting)
        return k if only_request else None
    return None


@example(schedule=handshake.handshake_delayed(BaseLink(rtt_us=10_000), 0, 3_000))
@given(schedule=handshake.handshake_delays())
def test_client_probes_carry_handshake_packets(longlook, target, schedule):
    """RFC 9002 §6.2.2.1: "When the PTO fires, the client MUST send a Handshake packet
    if it has Handshake keys, otherwise it MUST send an Initial packet in a UDP datagram
    with a payload of at least 1200 bytes", and §6.2.1: no PTO for the Application Data
    space until the handshake is confirmed. The client's datagrams after its Initial are
    held back, so its Handshake flight goes unacknowledged and its timer fires. Read off
    the client side's capture: every ack-eliciting datagram the client sends on its own
    (nothing from the server reached it and it sent nothing for 20 ms before) until a
    HANDSHAKE_DONE reaches it, with the datagrams it sends in the 5 ms after (one
    expiry's), carries an ack-eliciting Handshake packet once a server
    Handshake packet had reached it, and before that a Handshake packet or an Initial in
    at least 1200 bytes; the client's first datagram of STREAM data (its request) is the
    application's send, not a probe. Judged on the target's client (in a download without a peer it
    is the target's stack). Trigger: such a client probe."""
    outcomes.require_own_client(target)
    with outcomes.rare_trigger(), longlook.run(target, schedule, HANDSHAKE_PLAN) as obs:
        obs.completed()
        view = obs.client_wire
        arrivals = [d for d in view.datagrams if not d.entered and d.direction == "s2c"]
        keys_at = min((d.t_us for d in arrivals if any(p.space == "handshake" for p in d.packets)),
                      default=float("inf"))
        confirmed_at = analysis.handshake_done_at(view)
        heard = sorted(d.t_us for d in arrivals)
        sends = [d for d in view.datagrams if d.entered and d.direction == "c2s"]
        request = first_request(sends)
        probes, bad = 0, []
        for k, (prev, d) in enumerate(zip(sends, sends[1:]), start=1):
            if d.t_us >= confirmed_at or not any(p.ack_eliciting for p in d.packets):
                continue
            if k == request:
                continue  # the client's request: the application's send, no timer's
            i = bisect.bisect_left(heard, d.t_us)
            if d.t_us - prev.t_us < CLIENT_PROBE_QUIET_US or (i and d.t_us - heard[i - 1] < CLIENT_PROBE_QUIET_US):
                continue
            probes += 1
            # The expiry's datagrams: this one and those right after it (a stack may
            # send its 1-RTT data first and the Handshake packet in the next one).
            burst = [e for e in sends[k:] if e.t_us - d.t_us <= CLIENT_PROBE_BURST_US]
            handshake = any(p.space == "handshake" and p.ack_eliciting for e in burst for p in e.packets)
            padded_initial = any(any(p.space == "initial" for p in e.packets) and e.udp_size >= 1200 for e in burst)
            if not (handshake or (d.t_us < keys_at and padded_initial)):
                # Its ack-eliciting packets all 1-RTT (an ACK-only Handshake packet may ride along).
                one_rtt_only = d.t_us >= keys_at and all(p.space == "application" for e in burst for p in e.packets
                                                         if p.ack_eliciting)
                bad.append((d, d.t_us >= keys_at, one_rtt_only))
        if not probes:
            outcomes.not_exercised("the client sent no ack-eliciting datagram of its own before the handshake "
                                   "was confirmed")
        first = bad[0] if bad else None
        check(not bad, "client-probe-content", lambda: (
            f"{target.id}: {len(bad)} of the client's {probes} probes before the handshake was confirmed (a "
            f"HANDSHAKE_DONE reached it at t={confirmed_at / 1e6:.4f} s) carry no ack-eliciting Handshake packet"
            + ("" if first[1] else " nor a padded Initial")
            + f"; first at t={first[0].t_us / 1e6:.4f} s ({'with' if first[1] else 'before'} Handshake keys): "
            f"{[(p.space, [getattr(f, 'name', '?') for f in p.frames][:4]) for p in first[0].packets]}, "
            f"{first[0].udp_size} B"
        ), bad=len(bad),
            # Probes whose ack-eliciting packets are all 1-RTT, after Handshake keys
            # (what an Application Data PTO armed before confirmation sends, §6.2.1),
            # and all the others.
            one_rtt_only=sum(1 for *_, only in bad if only), other=sum(1 for *_, only in bad if not only))
