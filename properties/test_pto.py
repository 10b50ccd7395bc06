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

from hypothesis import example, given
from hypothesis import strategies as st

from harness.observe.events import Metrics, PacketSent
from harness.rfc import K_GRANULARITY_US
from harness.schedule import TransferPlan, strategies
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
        confirmed = analysis.sender_confirmed_us(view) or 0.0  # either direction
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
