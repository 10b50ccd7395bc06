"""The handshake's timers and limits: the client keeps the handshake alive when the
server cannot, its first probe waits the PTO of RFC 9002's initial RTT, no probe
timeout is shorter than kGranularity, Handshake probes leave max_ack_delay out (§6.2.1)
and carry Handshake packets, and the server stays within three times what it received
(RFC 9000 §8.1) while its retransmissions wait for the client.

RFC 9002 §6.2.2.1: "the client MUST set the PTO timer if the client has not received an
acknowledgment for any of its Handshake packets and the handshake is not confirmed (see
Section 4.1.2 of [QUIC-TLS]), even if there are no packets in flight." A server at its
anti-amplification limit may not send until the client does; a client that arms no
timer while nothing of its own is in flight leaves both waiting.
"""

from __future__ import annotations

import bisect
import itertools

from hypothesis import example, given

from harness.observe.events import Metrics
from harness.rfc import K_GRANULARITY_US
from harness.schedule import TransferPlan, handshake
from harness.schedule.strategies import BaseLink
from harness.verdict import analysis, outcomes
from harness.verdict.handshake_probes import client_probes
from harness.verdict.deviation import check

#: A certificate about 4 kB larger than the run's usual one: the server's first flight
#: spans four or more datagrams, and only its first reaches the client.
PLAN = TransferPlan(sizes=(50_000,), cert_padding=4_000)
#: How long after the server's first datagram reached it the client may send nothing
#: ack-eliciting, µs: RFC 9002 §6.2.2's PTO before any RTT sample is 999 ms (3 × 333
#: ms); after one, three round trips here. Twice the first, for a deferred expiry.
DEADLOCK_BOUND_US = 2_000_000
#: A client datagram within this of the server's first reaching it answers it (the
#: client's Finished, once it has the server's whole flight), µs.
ANSWER_US = 20_000


@example(schedule=handshake.server_flight_lost(BaseLink(), 0, 8))
@given(schedule=handshake.server_flights_lost())
def test_client_breaks_an_amplification_deadlock(longlook, target, schedule):
    """RFC 9002 §6.2.2.1, read off the client side's capture: the server's datagrams
    after its first are dropped, so the client's Initial is acknowledged, none of its
    Handshake packets is, and it has nothing ack-eliciting in flight. The client's next
    ack-eliciting datagram after the server's first reached it leaves within
    DEADLOCK_BOUND_US. Judged on the target's own client in a download. Trigger: the
    server's first datagram did not complete the client's handshake flight (the client
    answered it with nothing ack-eliciting within ANSWER_US) and no HANDSHAKE_DONE
    reached the client by then."""
    outcomes.require_own_client(target)
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        view = obs.client_wire
        arrivals = [d for d in view.datagrams if not d.entered and d.direction == "s2c"]
        if not arrivals:
            outcomes.not_exercised("no server datagram reached the client")
        first = min(d.t_us for d in arrivals)
        done_at = analysis.handshake_done_at(view)
        sends = sorted(d.t_us for d in view.datagrams if d.entered and d.direction == "c2s"
                       and any(p.ack_eliciting for p in d.packets))
        after = [t for t in sends if t >= first]
        if done_at <= first + ANSWER_US or (after and after[0] <= first + ANSWER_US):
            outcomes.not_exercised("the server's first datagram completed the client's handshake flight (it "
                                   "answered at once)")
        probe = after[0] if after else None
        check(probe is not None and probe - first <= DEADLOCK_BOUND_US, "no-client-probe-without-flight", lambda: (
            f"{target.id}: after the server's first datagram reached the client at t={first / 1e6:.3f} s, with its "
            f"Initial acknowledged and nothing ack-eliciting in flight, the client sent nothing ack-eliciting "
            + (f"until t={probe / 1e6:.3f} s ({(probe - first) / 1e6:.2f} s)" if probe else "at all")
            + f"; RFC 9002 §6.2.2.1 requires its PTO armed even with nothing in flight (about 1 s at most here)"
        ), wait_s=(probe - first) / 1e6 if probe else float("inf"))


#: RFC 9002 §6.2.2's initial RTT, and the first PTO it gives before any sample:
#: smoothed_rtt + max(4 × rttvar, kGranularity) with rttvar = initial_rtt / 2, no
#: max_ack_delay in the Initial space (§6.2.1), µs.
INITIAL_RTT_US = 333_000
FIRST_PTO_US = 3 * INITIAL_RTT_US
#: The first probe may leave this much earlier or later than FIRST_PTO_US: timer
#: slack and scheduling, and the 25 ms a stack adds if it counts max_ack_delay there
#: (another rule's business).
FIRST_PTO_SLACK_US = (50_000, 100_000)
#: Client datagrams within this of its first are its first flight (µs).
FLIGHT_US = 10_000
#: A small object: the property is over before the transfer begins.
FIRST_PTO_PLAN = TransferPlan(sizes=(50_000,))


@example(schedule=handshake.client_first_flight_lost(BaseLink(), 0))
@given(schedule=handshake.client_first_flights_lost())
def test_first_probe_uses_an_initial_rtt_of_333_ms(longlook, target, schedule):
    """RFC 9002 §6.2.2: "When no previous RTT is available, the initial RTT SHOULD be
    set to 333 milliseconds. This results in handshakes starting with a PTO of 1
    second". The client's first datagrams are dropped, so it has no RTT sample and no
    response: its first probe, read off the link's ground truth (arrival times, drops
    included), leaves 999 ms after its first datagram (-50/+100 ms). Judged on the
    target's own client in a download; the measured initial RTT is a third of the gap.
    Trigger: the client's first datagram was dropped, and it sent again before any
    server datagram reached it."""
    outcomes.require_own_client(target)
    with longlook.run(target, schedule, FIRST_PTO_PLAN) as obs:
        obs.completed()
        ours = obs.transfer_records("c2s")
        first = ours[0]
        if first.fate != "dropped":
            outcomes.not_exercised("the client's first datagram was not dropped")
        later = [r for r in ours if r.arr_us - first.arr_us >= FLIGHT_US]
        if not later:
            outcomes.not_exercised("the client sent nothing after its first flight")
        probe = later[0]
        heard = [r for r in obs.transfer_records("s2c") if r.dep_us is not None and r.dep_us < probe.arr_us]
        if heard:
            outcomes.not_exercised("a server datagram reached the client before its next send: no probe to time")
        gap = probe.arr_us - first.arr_us
        low, high = FIRST_PTO_US - FIRST_PTO_SLACK_US[0], FIRST_PTO_US + FIRST_PTO_SLACK_US[1]
        check(low <= gap <= high, "initial-rtt-not-333ms", lambda: (
            f"{target.id}: the client's first datagram left at {first.arr_us / 1e3:.1f} ms and was dropped; its "
            f"first probe left {gap / 1e3:.1f} ms later, where an initial RTT of 333 ms gives a PTO of 999 ms "
            f"({low / 1e3:.0f}-{high / 1e3:.0f} ms); RFC 9002's formula would give that gap from an initial RTT of "
            f"{gap / 3e3:.0f} ms"
        ), initial_rtt_ms=round(gap / 3e3, 1), gap_ms=round(gap / 1e3, 1))


#: A client datagram within this of the server's datagram reaching it answers it (µs):
#: no probe timeout is that short here, an unfloored one on these links being three
#: round trips of at least 100 µs each.
IMMEDIATE_US = 150


@example(schedule=handshake.server_flight_lost(BaseLink(rate_bps=1_000_000_000, rtt_us=200), 0, 8))
@given(schedule=handshake.sub_ms_server_flights_lost())
def test_handshake_probe_waits_at_least_the_granularity(longlook, target, schedule):
    """RFC 9002 §6.2.1: "The PTO period MUST be at least kGranularity to avoid the
    timer expiring immediately." On a link of 100-200 µs round trip the server's first
    datagram (its Initial, acknowledging the client's) reaches the client and the rest
    of its flight is dropped, as in the anti-deadlock property above: the client, with
    one RTT sample and nothing in flight, must still arm its Handshake timer
    (§6.2.2.1), and its probe must leave at least kGranularity after the timer's start.
    Stacks start it at that arrival (Appendix A's "now") or at their last ack-eliciting
    send (quiche); the later of the two can be no earlier than the earlier, so the
    probe is timed from the last ack-eliciting send before the arrival. Read off the
    client side's capture, which stamps a send after the client wrote it: the gap seen
    is never shorter than the client's. Judged on the target's own client in a
    download. Trigger: the client's one RTT sample (its first send to that arrival)
    was under a quarter of kGranularity, so a period without the floor (smoothed_rtt +
    4 × rttvar: three samples after one) would have expired sooner from either start,
    and the client's next ack-eliciting datagram was sent on its own: not at once,
    with no other server datagram arriving first."""
    outcomes.require_own_client(target)
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        view = obs.client_wire
        arrivals = sorted(d.t_us for d in view.datagrams if not d.entered and d.direction == "s2c")
        sends = sorted(((d.t_us, d) for d in view.datagrams if d.entered and d.direction == "c2s"), key=lambda s: s[0])
        if not arrivals or not sends:
            outcomes.not_exercised("no server datagram reached the client")
        first = arrivals[0]
        sample = first - sends[0][0]
        if 4 * sample >= K_GRANULARITY_US:
            outcomes.not_exercised(f"the client's RTT sample was {sample:.0f} µs: a period without the floor "
                                   f"would not have expired before kGranularity either")
        probe = next((t for t, d in sends if t > first and any(p.ack_eliciting for p in d.packets)), None)
        if probe is None:
            outcomes.not_exercised("the client sent nothing ack-eliciting after the server's first datagram")
        if probe - first <= IMMEDIATE_US:
            outcomes.not_exercised("the client answered the server's first datagram at once (its flight was "
                                   "complete)")
        if any(first < t < probe for t in arrivals):
            outcomes.not_exercised("another server datagram reached the client before it probed")
        base = max((t for t, d in sends if t < first and any(p.ack_eliciting for p in d.packets)),
                   default=sends[0][0])
        check(probe - base >= K_GRANULARITY_US, "pto-below-granularity", lambda: (
            f"{target.id}: the server's first datagram reached the client {sample:.0f} µs after the client's first "
            f"send (its one RTT sample); with the rest of the flight dropped and nothing else arriving, the client "
            f"probed {probe - base:.0f} µs after its last ack-eliciting send ({probe - first:.0f} µs after that "
            f"arrival); RFC 9002 §6.2.1: the PTO period MUST be at least kGranularity ({K_GRANULARITY_US} µs)"
        ), wait_us=round(probe - base), sample_us=round(sample))


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


@example(schedule=handshake.handshake_delayed(BaseLink(rtt_us=10_000), 0, 3_000))
@example(schedule=handshake.handshake_delayed(BaseLink(rtt_us=10_000), 0, 3_000, first=2))
@given(schedule=handshake.handshake_flight_delays())
def test_client_probes_carry_handshake_packets(longlook, target, schedule):
    """RFC 9002 §6.2.2.1: "When the PTO fires, the client MUST send a Handshake packet
    if it has Handshake keys, otherwise it MUST send an Initial packet in a UDP datagram
    with a payload of at least 1200 bytes", and §6.2.1: no PTO for the Application Data
    space until the handshake is confirmed. The client's datagrams after its Initial are
    held back (from its third on, where its Initial takes two), so its Handshake
    flight goes unacknowledged and its timer fires. Read off
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
        found = client_probes(obs.client_wire)
        keys_at, confirmed_at, probes = found.keys_at, found.confirmed_at, len(found.probes)
        bad = []
        for probe in found.probes:
            d = probe.first
            padded_initial = any(any(p.space == "initial" for p in e.packets) and e.udp_size >= 1200
                                 for e in probe.burst)
            if not (probe.carries("handshake") or (d.t_us < keys_at and padded_initial)):
                # Its ack-eliciting packets all 1-RTT (an ACK-only Handshake packet may ride along).
                one_rtt_only = d.t_us >= keys_at and all(p.space == "application" for e in probe.burst
                                                         for p in e.packets if p.ack_eliciting)
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

