"""RTT estimation (RFC 9002 §5): which ACK frames give RTT samples (§5.1), min_rtt
(§5.2), and how far the ACK Delay may adjust a sample (§5.3).

Read off the sender's qlog (latest_rtt, min_rtt, smoothed_rtt in its metrics),
joined to the ACK frames that reached it in the decrypted capture of its side of
the link (analysis.acks_received). A logged sample belongs to a frame that arrived
before it was logged, by some lag, and whose RTT plus that lag it equals: a sender
that handles a frame late measures, and logs, late by the same time. The frame's RTT
is its arrival minus the send of its largest acknowledged packet, or that less the
ACK Delay (aioquic and quic-go log the adjusted sample as latest_rtt). In virtual
time log and capture read one clock with no lag, and the join is exact to a few µs;
in real time a lag of up to 200 ms and the endpoint's latencies (a few ms) are let
through: a frame with the same largest acknowledged as a sample-giving one handled
late then explains a sample as well, so real time judges fewer samples, never
fails one wrongly.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import example, given
from hypothesis import strategies as st

from harness.observe.events import Metrics
from harness.schedule import Action, TransferPlan, strategies
from harness.schedule.strategies import QUIC, BaseLink
from harness.verdict import analysis, outcomes
from harness.verdict.bounds import path_rtt_us
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(1_000_000,))
#: A receiver that holds each ACK 60 ms, past the 25 ms max_ack_delay receivers
#: declare, and reports the wait (LL_ACK_HOLD_MS): no receiver's own timing need ever
#: exceed its max_ack_delay, so the cap of §5.3 has nothing to act on without one.
HELD = TransferPlan(sizes=(1_000_000,), ack_hold_ms=60)
#: Two RTTs that are the same as logged: ms with µs decimals (quiche), f32 seconds (quinn).
SAME_US = 2.0
#: How far below the link's base RTT a logged RTT may read (clock rounding).
PATH_TOLERANCE_US = 200.0
#: RFC 9002 §5.3's gain: smoothed_rtt = 7/8 · smoothed_rtt + 1/8 · adjusted_rtt.
GAIN = 1 / 8

#: Jitter of up to 10 ms in the data direction, order kept: min_rtt has to follow it.
JITTER = BaseLink().schedule(0, s2c=BaseLink().settings(jitter_us=10_000))
#: Jitter that reorders data: the receiver acknowledges a late packet at once, in a
#: frame whose largest acknowledged was acknowledged before.
REORDERING = BaseLink().schedule(0, s2c=BaseLink().settings(jitter_us=4_000, jitter_reorders=True))
#: Lost acknowledgements: the receiver's next frames repeat or extend the ones lost.
ACK_LOSS = BaseLink().schedule(0, actions=[Action("c2s", i, "drop", flow=QUIC) for i in range(10, 200, 7)])


@dataclass(frozen=True)
class Join:
    """How far a logged sample may sit from a frame's arrival and RTT."""

    lag_us: float  # the frame arrived up to this long before the sample was logged
    late_us: float  # ... or this long after (the log's clock against the capture's)
    below_us: float  # the sample, less the lag, reads up to this much below the frame's RTT
    above_us: float  # ... or this much above (the send's latency, from the log to the wire)


VIRTUAL_JOIN = Join(50, 5, 5, 50)
REAL_JOIN = Join(200_000, 2_000, 5_000, 10_000)


def explains(f: analysis.AckSeen, m: Metrics, mad_us: float, join: Join) -> bool:
    """Whether `m`'s latest_rtt is the RTT sample `f` gives, raw or less its (capped)
    ACK Delay, taken as late as `m` was logged after `f` arrived."""
    lag, raw = m.t_us - f.t_us, f.sample_us
    if raw is None or m.latest_rtt_us is None or not -join.late_us <= lag <= join.lag_us:
        return False
    value = m.latest_rtt_us - max(lag, 0.0)
    return any(x - join.below_us <= value <= x + join.above_us
               for x in (raw, raw - min(f.delay_us, mad_us), raw - f.delay_us))


def unexplained_samples(trace, frames, mad_us: float, join: Join):
    """[(sample, the frames that do not give a sample yet explain it)] for every new
    latest_rtt the sender logged that no sample-giving frame explains (a repeated
    value is no new sample: some stacks log every metric at every update)."""
    first_ack = min((f.t_us for f in frames), default=None)
    out, previous = [], None
    for m in trace.of(Metrics):
        value = m.latest_rtt_us
        if value is None or first_ack is None or m.t_us < first_ack - join.late_us:
            continue
        if previous is not None and abs(value - previous) <= SAME_US:
            continue
        previous = value
        near = [f for f in frames if m.t_us - join.lag_us <= f.t_us <= m.t_us + join.late_us]
        fits = [f for f in near if explains(f, m, mad_us, join)]
        if not any(f.gives_sample for f in fits):
            out.append((m, [f for f in fits if f.space == "application"]))
    return out


def joined(obs, target):
    obs.completed()
    view = obs.wire
    frames = analysis.acks_received(view)
    if not frames:
        outcomes.not_exercised("no ACK frame reached the sender on the capture")
    join = VIRTUAL_JOIN if obs.example.mode == "virtual" else REAL_JOIN
    return obs.sender, frames, analysis.max_ack_delay_us(view), join


def _describe(m: Metrics, f: analysis.AckSeen) -> str:
    return (f"latest_rtt {m.latest_rtt_us / 1e3:.3f} ms logged at t={m.t_us / 1e6:.6f} s equals the RTT of the ACK "
            f"frame that arrived at t={f.t_us / 1e6:.6f} s (largest {f.largest}, {f.newly} newly acknowledged, "
            f"ACK Delay {f.delay_us} µs: {f.sample_us / 1e3:.3f} ms)")


#: What each §5.1 rule forbids a sample to come from: (frames of that kind, deviation kind, what they lack).
RULES = {
    "new-largest": (lambda f: not f.new_largest, "rtt-sample-from-old-largest",
                    "whose largest acknowledged was acknowledged before"),
    "ack-eliciting": (lambda f: not f.eliciting, "rtt-sample-without-ack-eliciting",
                      "which newly acknowledged no ack-eliciting packet"),
}


def judge_sample_sources(target_id: str, trace, frames, mad_us: float, join: Join, rule: str) -> int:
    """Fails where a logged sample is explained only by frames `rule` forbids to give
    one; returns how many such frames (application space) reached the sender."""
    forbidden, kind, lacks = RULES[rule]
    triggers = sum(1 for f in frames if f.space == "application" and forbidden(f))
    for m, fits in unexplained_samples(trace, frames, mad_us, join):
        bad = [f for f in fits if forbidden(f)]
        check(not bad, kind, lambda: (
            f"{target_id}: {_describe(m, bad[0])}, {lacks}; no frame that may give a sample explains it "
            f"({triggers} frames of that kind in the run)"), latest_rtt_us=m.latest_rtt_us, frames=triggers)
    return triggers


@example(schedule=REORDERING)
@example(schedule=ACK_LOSS)
@given(schedule=st.one_of(strategies.delay_jitter(), strategies.combinations()))
def test_rtt_samples_need_a_new_largest_acknowledged(longlook, target, schedule):
    """RFC 9002 §5.1: an ACK frame that does not newly acknowledge its largest
    acknowledged packet gives no RTT sample. Trigger: such a frame (application
    space, not a duplicated packet) reached the sender."""
    outcomes.require(target, "rtt_samples")
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN) as obs:
        trace, frames, mad, join = joined(obs, target)
        if not judge_sample_sources(target.id, trace, frames, mad, join, "new-largest"):
            outcomes.not_exercised("every ACK frame newly acknowledged its largest acknowledged packet")


@example(schedule=REORDERING)
@example(schedule=ACK_LOSS)
@given(schedule=st.one_of(strategies.delay_jitter(), strategies.loss_only()))
def test_rtt_samples_need_an_ack_eliciting_packet(longlook, target, schedule):
    """RFC 9002 §5.1: an ACK frame that newly acknowledges no ack-eliciting packet
    (only ACK-only packets, or nothing new) generates no RTT sample. Trigger: such a
    frame (application space, not a duplicated packet) reached the sender."""
    outcomes.require(target, "rtt_samples")
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN) as obs:
        trace, frames, mad, join = joined(obs, target)
        if not judge_sample_sources(target.id, trace, frames, mad, join, "ack-eliciting"):
            outcomes.not_exercised("every ACK frame newly acknowledged an ack-eliciting packet")


#: RFC 9002 §5.2 lets an endpoint refresh min_rtt ("Endpoints SHOULD NOT refresh the
#: min_rtt value too often") and gives no rate: read as at most once per this long,
#: µs, the interval at which BBR re-measures its own minimum (ProbeRTT,
#: draft-ietf-ccwg-bbr). Outside persistent congestion a rise sooner is a deviation.
REFRESH_INTERVAL_US = 10_000_000


def judge_min_rtt(target_id: str, trace, first_ack_us: float, path_us: float, collapses: list[float]) -> int:
    """Checks min_rtt against the latest_rtt samples logged from the first ACK on
    (earlier values are placeholders: quinn logs its initial RTT as both); returns
    how many samples there were. A rise of min_rtt is a reset, which §5.2 asks for
    after persistent congestion (a collapse to the minimum window) and allows as a
    refresh REFRESH_INTERVAL_US after the first sample or the last refresh; a rise
    sooner is a refresh too often."""
    samples, low, min_rtt, since, refreshed = 0, None, None, 0.0, 0.0
    for m in trace.of(Metrics):
        if m.t_us < first_ack_us:
            continue
        latest, current = m.latest_rtt_us, m.min_rtt_us if m.min_rtt_us is not None else min_rtt
        if latest is not None:
            samples += 1
            if samples == 1:
                check(current is not None and abs(current - latest) <= SAME_US, "min-rtt-not-first-sample",
                      lambda: f"{target_id}: the first RTT sample, {latest / 1e3:.3f} ms at t={m.t_us / 1e6:.6f} s, "
                              f"left min_rtt at {'nothing' if current is None else f'{current / 1e3:.3f} ms'}",
                      latest_rtt_us=latest, min_rtt_us=current)
                low, refreshed = latest, m.t_us
            elif current > min_rtt + SAME_US and any(since <= c <= m.t_us for c in collapses):
                low = latest  # reset after persistent congestion: the newest sample
            elif current > min_rtt + SAME_US:
                after_s = (m.t_us - refreshed) / 1e6
                check(m.t_us - refreshed >= REFRESH_INTERVAL_US, "min-rtt-refreshed-too-soon", lambda: (
                    f"{target_id}: min_rtt rose {min_rtt / 1e3:.3f} → {current / 1e3:.3f} ms at t={m.t_us / 1e6:.6f} s "
                    f"with no persistent congestion since, {after_s:.2f} s after the first sample or the last "
                    f"refresh; RFC 9002 §5.2: SHOULD NOT refresh the min_rtt too often (read: at most once per "
                    f"{REFRESH_INTERVAL_US / 1e6:.0f} s)"), refresh_after_s=after_s)
                low, refreshed = latest, m.t_us  # a refresh: the newest sample
            else:
                low = min(low, latest)
        if low is not None and current is not None:
            check(current <= low + SAME_US, "min-rtt-above-a-sample", lambda: (
                f"{target_id}: min_rtt {current / 1e3:.3f} ms at t={m.t_us / 1e6:.6f} s is above an RTT sample of "
                f"{low / 1e3:.3f} ms taken since the first one (and no persistent congestion since)"
            ), min_rtt_over_sample=current / low)
            check(current >= path_us - PATH_TOLERANCE_US, "rtt-below-path-delay", lambda: (
                f"{target_id}: min_rtt {current / 1e3:.3f} ms at t={m.t_us / 1e6:.6f} s is below the link's base "
                f"round trip of {path_us / 1e3:.3f} ms: no packet makes that trip"), rtt_over_path=current / path_us)
        if m.min_rtt_us is not None:
            min_rtt, since = m.min_rtt_us, m.t_us
    return samples


def _collapses(trace) -> list[float]:
    """Times the window fell to about kMinimumWindow: persistent congestion (§7.6.2)."""
    mss = analysis.max_datagram(trace)
    return [c.t_us for c in analysis.reductions(trace) if c.after <= 3 * mss]


@example(schedule=JITTER)
@given(schedule=st.one_of(strategies.delay_jitter(), strategies.loss_only()))
def test_min_rtt_is_the_least_rtt_sample(longlook, target, schedule):
    """RFC 9002 §5.2: min_rtt is set to the first RTT sample, then to the lesser of
    itself and each later sample: it is never above a sample taken since, nor (a
    broken estimator) below the link's base round trip. It may rise after persistent
    congestion, or as a refresh, which "SHOULD NOT" come "too often": at most once per
    REFRESH_INTERVAL_US. Trigger: an RTT sample."""
    outcomes.require(target, "rtt_samples")
    outcomes.require(target, "min_rtt")
    with longlook.run(target, schedule, PLAN) as obs:
        trace, frames, _, join = joined(obs, target)
        first_ack = min(f.t_us for f in frames) - join.late_us
        if not judge_min_rtt(target.id, trace, first_ack, path_rtt_us(schedule), _collapses(trace)):
            outcomes.not_exercised("the sender logged no RTT sample")


def judge_smoothed_floor(target_id: str, trace, first_ack_us: float, path_us: float) -> None:
    """smoothed_rtt ≥ min_rtt while min_rtt is not reset: each adjusted sample is at
    least the min_rtt of its time (§5.3) and min_rtt only falls, so their moving
    average is too, whatever its gain. And no RTT is below the link's round trip.
    A sender that logs no min_rtt at all is held to the least of its samples, which
    is §5.2's definition of min_rtt."""
    min_rtt = None
    metrics = trace.of(Metrics)
    logs_min = any(m.min_rtt_us is not None for m in metrics)
    for m in metrics:
        if m.t_us < first_ack_us or (m.latest_rtt_us is None and min_rtt is None):
            continue  # before the first sample: placeholders
        if not logs_min and m.latest_rtt_us is not None:
            min_rtt = m.latest_rtt_us if min_rtt is None else min(min_rtt, m.latest_rtt_us)
        elif m.min_rtt_us is not None:
            if min_rtt is not None and m.min_rtt_us > min_rtt + SAME_US:
                return  # a reset (persistent congestion): the bound holds no longer
            min_rtt = m.min_rtt_us
        srtt = m.smoothed_rtt_us
        if srtt is None or min_rtt is None:
            continue
        check(srtt >= min_rtt - SAME_US, "smoothed-rtt-below-min-rtt", lambda: (
            f"{target_id}: smoothed_rtt {srtt / 1e3:.3f} ms at t={m.t_us / 1e6:.6f} s is below min_rtt "
            f"{min_rtt / 1e3:.3f} ms: an ACK Delay was subtracted below min_rtt"), srtt_over_min_rtt=srtt / min_rtt)
        check(srtt >= path_us - PATH_TOLERANCE_US, "rtt-below-path-delay", lambda: (
            f"{target_id}: smoothed_rtt {srtt / 1e3:.3f} ms at t={m.t_us / 1e6:.6f} s is below the link's base "
            f"round trip of {path_us / 1e3:.3f} ms"), rtt_over_path=srtt / path_us)


def floor_bites(frames, mad_us: float) -> list[analysis.AckSeen]:
    """Sample-giving frames whose ACK Delay, subtracted, would take the sample below
    the least sample before it: where §5.3's floor forbids the subtraction."""
    out, low = [], None
    for f in frames:
        if not f.gives_sample:
            continue
        low = f.sample_us if low is None else min(low, f.sample_us)
        if f.space == "application" and f.delay_us and f.sample_us - min(f.delay_us, mad_us) < low:
            out.append(f)
    return out


@example(schedule=strategies.CLEAN_LINK)
@given(schedule=strategies.delay_jitter())
def test_ack_delay_never_takes_a_sample_below_min_rtt(longlook, target, schedule):
    """RFC 9002 §5.3: the ACK Delay is not subtracted where the result would be
    below min_rtt, so smoothed_rtt never falls below min_rtt (nor below the link's
    round trip). Trigger: a sample whose ACK Delay would take it below min_rtt."""
    outcomes.require(target, "rtt_samples")
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN) as obs:
        trace, frames, mad, join = joined(obs, target)
        bites = floor_bites(frames, mad)
        if not bites:
            outcomes.not_exercised("no ACK Delay would have taken a sample below min_rtt")
        judge_smoothed_floor(target.id, trace, min(f.t_us for f in frames) - join.late_us, path_rtt_us(schedule))


def judge_ack_delay_cap(target_id: str, trace, over: list[analysis.AckSeen], mad_us: float, join: Join) -> int:
    """For each sample-giving frame whose ACK Delay exceeds max_ack_delay, the
    adjusted sample the sender's smoothed_rtt update implies (§5.3's gain of 1/8) is
    at least the sample less max_ack_delay, or min_rtt. Returns how many were judged."""
    metrics = [m for m in trace.of(Metrics) if m.smoothed_rtt_us is not None]
    judged = 0
    for f in over:
        joined = [(a, b) for a, b in zip(metrics, metrics[1:]) if explains(f, b, mad_us, join)]
        if not joined:
            continue
        before, after = joined[0]
        min_rtt = next((m.min_rtt_us for m in reversed(metrics[:metrics.index(after) + 1]) if m.min_rtt_us), 0.0)
        implied = before.smoothed_rtt_us + (after.smoothed_rtt_us - before.smoothed_rtt_us) / GAIN
        least = max(min_rtt, f.sample_us - mad_us)
        judged += 1
        check(implied >= least - join.below_us - SAME_US / GAIN, "ack-delay-above-max-ack-delay", lambda: (
            f"{target_id}: the ACK frame at t={f.t_us / 1e6:.6f} s (RTT {f.sample_us / 1e3:.3f} ms, ACK Delay "
            f"{f.delay_us / 1e3:.3f} ms > max_ack_delay {mad_us / 1e3:.3f} ms) moved smoothed_rtt "
            f"{before.smoothed_rtt_us / 1e3:.3f} → {after.smoothed_rtt_us / 1e3:.3f} ms: an adjusted sample of "
            f"{implied / 1e3:.3f} ms, below the {least / 1e3:.3f} ms the capped delay allows"
        ), ack_delay_us=f.delay_us, max_ack_delay_us=mad_us, implied_over_allowed=implied / least)
    return judged


@example(schedule=strategies.CLEAN_LINK)
@given(schedule=strategies.combinations())
def test_ack_delay_is_capped_at_max_ack_delay(longlook, target, schedule):
    """RFC 9002 §5.3: once the handshake is confirmed, at most the peer's
    max_ack_delay of an ACK Delay is subtracted from a sample. Trigger: a sample
    whose frame's ACK Delay exceeds the max_ack_delay its sender declared."""
    outcomes.require(target, "rtt_samples")
    # A receiver that can hold its ACKs does (caps.json honours.ack_hold); any other
    # acknowledges on its own timing, which exceeds its max_ack_delay only by chance.
    plan = HELD if target.receiver.honours.get("ack_hold") else PLAN
    with outcomes.rare_trigger(), longlook.run(target, schedule, plan) as obs:
        trace, frames, mad, join = joined(obs, target)
        confirmed = analysis.sender_confirmed_us(obs.wire)  # the sender's, either direction
        over = [f for f in frames if f.gives_sample and f.space == "application" and f.delay_us > mad
                and confirmed is not None and f.t_us > confirmed]
        if not over:
            outcomes.not_exercised(f"no ACK Delay above the peer's max_ack_delay ({mad / 1e3:.0f} ms) after the "
                                   "handshake was confirmed")
        if not judge_ack_delay_cap(target.id, trace, over, mad, join):
            outcomes.not_exercised(f"none of the {len(over)} samples with an ACK Delay above max_ack_delay could be "
                                   "joined to a smoothed_rtt update")
