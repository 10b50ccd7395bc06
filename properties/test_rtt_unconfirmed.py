"""RTT samples before the handshake is confirmed (RFC 9002 §5.3): until then the
sender ignores the peer's max_ack_delay and subtracts the whole ACK Delay it reports.

Only an uploading client can be judged: a server confirms on completing its
handshake, before it may process any 1-RTT packet (RFC 9001 §4.1.2), while a client
confirms on receiving HANDSHAKE_DONE and reads ACKs of its 1-RTT data before that.
The receiver holds its ACKs past its max_ack_delay (TransferPlan.ack_hold_ms) and the
link drops its HANDSHAKE_DONE, so held ACKs reach the client unconfirmed. A client
MAY also confirm on an ACK of a 1-RTT packet (the same section), so a frame counts as
before confirmation only where the wire shows the client still unconfirmed after
taking its sample: a Handshake packet it sent later (it MUST discard the Handshake
keys on confirming, RFC 9001 §4.9.2) before any HANDSHAKE_DONE reached it. The
samples are read as properties/test_rtt.py reads them: the sender's qlog joined to
the ACK frames of its side's decrypted capture.
"""

from __future__ import annotations

from hypothesis import example, given

from harness.observe.events import Metrics
from harness.schedule import handshake
from harness.schedule.strategies import BaseLink
from harness.verdict import analysis, outcomes
from harness.verdict.deviation import check
from properties.test_rtt import GAIN, HELD, PLAN, SAME_US, Join, explains, joined


def readings(lo_us: float, hi_us: float, delay_us: float, min_rtt_us: float) -> list[tuple[float, float]]:
    """The adjusted_rtt of RFC 9002 §5.3 (the sample less `delay_us`, unless that takes
    it below min_rtt) for a sample anywhere in [lo_us, hi_us]: one or two intervals."""
    out = []
    if hi_us - delay_us >= min_rtt_us:
        out.append((max(lo_us, min_rtt_us + delay_us) - delay_us, hi_us - delay_us))
    if lo_us < min_rtt_us + delay_us:
        out.append((lo_us, min(hi_us, min_rtt_us + delay_us)))
    return out


def log_resolution_us(values: list[float]) -> float:
    """The coarsest of 1 ms, 100 µs and 10 µs that every logged value is a whole
    multiple of (1 µs where none is)."""
    for step in (1_000.0, 100.0, 10.0):
        if values and all(abs(v / step - round(v / step)) < 1e-6 for v in values):
            return step
    return 1.0


def _within(x: float, intervals: list[tuple[float, float]], slack: float) -> bool:
    return any(a - slack <= x <= b + slack for a, b in intervals)


def judge_cap_before_confirmation(target_id: str, trace, early: list[analysis.AckSeen], mad_us: float,
                                  join: Join, unconfirmed_until_us: float) -> int:
    """For each sample-giving frame that reached the sender before its handshake was
    confirmed with an ACK Delay above max_ack_delay, the adjusted sample its
    smoothed_rtt update implies (§5.3's gain of 1/8) is matched to three readings:
    the whole ACK Delay subtracted (what §5.3 asks), the delay capped at max_ack_delay
    (the deviation), or none subtracted (not this rule's concern). Each reading is the
    range the sender's own sample allows: the frame's RTT on the capture, plus up to the
    time until the sender logged it, within the join's tolerance. A frame is judged where
    the implied sample fits the capped reading alone (it fails) or the others alone (it
    passes); where it fits both or none, it is not. Only samples logged before
    `unconfirmed_until_us` (when the sender was last seen unconfirmed) are judged.
    Returns how many were judged."""
    metrics = [m for m in trace.of(Metrics) if m.smoothed_rtt_us is not None]
    # Each logged smoothed_rtt may be off by its log's resolution (kwik logs whole
    # ms): the update's difference, and so the implied sample, by 1/GAIN times that.
    slack = max(SAME_US, log_resolution_us([m.smoothed_rtt_us for m in metrics])) / GAIN
    judged = 0
    for f in early:
        joined = [(a, b) for a, b in zip(metrics, metrics[1:]) if explains(f, b, mad_us, join)]
        if not joined:
            continue
        before, after = joined[0]
        if after.t_us > unconfirmed_until_us:
            continue
        # A sender that logs no min_rtt may or may not have hit §5.3's floor: both.
        min_rtt = next((m.min_rtt_us for m in reversed(metrics[:metrics.index(after) + 1]) if m.min_rtt_us), None)
        # Logged late: the sender measured on the frame's arrival and wrote later, or
        # handled it late and measured late by as much; a reading fits either.
        lo, hi = f.sample_us - join.below_us, f.sample_us + max(after.t_us - f.t_us, 0.0) + join.above_us
        floors = [min_rtt] if min_rtt is not None else [float("-inf"), float("inf")]
        whole = [r for m in floors for r in readings(lo, hi, f.delay_us, m)]
        capped = [r for m in floors for r in readings(lo, hi, mad_us, m)]
        implied = before.smoothed_rtt_us + (after.smoothed_rtt_us - before.smoothed_rtt_us) / GAIN
        is_capped = _within(implied, capped, slack)
        if is_capped == (_within(implied, whole, slack) or _within(implied, [(lo, hi)], slack)):
            continue
        judged += 1
        check(not is_capped, "max-ack-delay-applied-before-confirmation", lambda: (
            f"{target_id}: the ACK frame at t={f.t_us / 1e6:.6f} s, before the handshake was confirmed (RTT "
            f"{f.sample_us / 1e3:.3f} ms, ACK Delay {f.delay_us / 1e3:.3f} ms > max_ack_delay {mad_us / 1e3:.3f} ms, "
            f"min_rtt {'not logged' if min_rtt is None else f'{min_rtt / 1e3:.3f} ms'}) moved smoothed_rtt {before.smoothed_rtt_us / 1e3:.3f} → "
            f"{after.smoothed_rtt_us / 1e3:.3f} ms: an adjusted sample of {implied / 1e3:.3f} ms, a delay capped at "
            f"max_ack_delay, where the whole delay gives "
            f"{' or '.join(f'{a / 1e3:.3f}-{b / 1e3:.3f}' for a, b in whole)} ms"
        ), ack_delay_us=f.delay_us, max_ack_delay_us=mad_us, implied_over_sample=implied / f.sample_us)
    return judged


def last_unconfirmed_us(view) -> float:
    """The last time the wire shows the sender (the client of an upload; its datagrams
    travel s2c) unconfirmed: its last Handshake packet sent before the first
    HANDSHAKE_DONE reached it. A client discards its Handshake keys on confirming (RFC
    9001 §4.9.2), whatever confirmed it; -inf when no such packet was sent."""
    done = analysis.handshake_done_at(view, "c2s")
    return max((d.t_us for d in view.datagrams if d.direction == "s2c" and d.entered and d.t_us < done
                and any(p.space == "handshake" for p in d.packets)), default=float("-inf"))


@example(schedule=handshake.handshake_done_lost(BaseLink(rtt_us=20_000), 0, 1, 2))
@given(schedule=handshake.handshake_done_losses())
def test_max_ack_delay_is_ignored_until_the_handshake_is_confirmed(longlook, target, schedule):
    """RFC 9002 §5.3: "the endpoint SHOULD ignore max_ack_delay until the handshake is
    confirmed": before it, the whole of a reported ACK Delay is subtracted from a
    sample (above min_rtt), not at most max_ack_delay of it. Only an uploading client
    can see it: a server confirms on completing its handshake, before any 1-RTT ACK
    can reach it (RFC 9001 §4.1.2), so a download's case is not applicable. The
    receiver holds its ACKs 60 ms where it can (caps.json honours.ack_hold) and the
    link drops its HANDSHAKE_DONE, so the client's data is acknowledged, late, before
    its handshake is confirmed. Trigger: a sample-giving 1-RTT frame with an ACK Delay
    above max_ack_delay before the sender received HANDSHAKE_DONE."""
    if target.direction != "upload":
        outcomes.not_applicable("a server sender confirms its handshake on completing it, before a 1-RTT ACK can "
                                "reach it; judged on an uploading client (--direction upload)")
    outcomes.require(target, "rtt_samples")
    plan = HELD if target.receiver.honours.get("ack_hold") else PLAN
    with outcomes.rare_trigger(), longlook.run(target, schedule, plan) as obs:
        trace, frames, mad, join = joined(obs, target)
        unconfirmed = last_unconfirmed_us(obs.wire)
        early = [f for f in frames if f.gives_sample and f.space == "application" and f.delay_us > mad
                 and f.t_us < unconfirmed]
        if not early:
            outcomes.not_exercised(f"no ACK Delay above the peer's max_ack_delay ({mad / 1e3:.0f} ms) reached the "
                                   "sender while the wire showed it unconfirmed (a Handshake packet sent later, "
                                   "before HANDSHAKE_DONE reached it)")
        if not judge_cap_before_confirmation(target.id, trace, early, mad, join, unconfirmed):
            outcomes.not_exercised(f"none of the {len(early)} samples with an ACK Delay above max_ack_delay before "
                                   "confirmation could be joined to a smoothed_rtt update, logged while the sender "
                                   "was unconfirmed, with the capped reading apart from the others")
