"""The client's side of the handshake: it keeps the handshake alive when the server
cannot, its first probe waits the PTO of RFC 9002's initial RTT, and no probe timeout
is shorter than kGranularity.

RFC 9002 §6.2.2.1: "the client MUST set the PTO timer if the client has not received an
acknowledgment for any of its Handshake packets and the handshake is not confirmed (see
Section 4.1.2 of [QUIC-TLS]), even if there are no packets in flight." A server at its
anti-amplification limit may not send until the client does; a client that arms no
timer while nothing of its own is in flight leaves both waiting.
"""

from __future__ import annotations

from hypothesis import example, given

from harness.rfc import K_GRANULARITY_US
from harness.schedule import TransferPlan, handshake
from harness.schedule.strategies import BaseLink
from harness.verdict import analysis, outcomes
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
