"""ECN-CE: a congestion signal a loss-free link gives.

RFC 9002 §7.3.1: "The sender MUST exit slow start and enter a recovery period when a
packet is lost or when the ECN-CE count reported by its peer increases"; §7.3.2 (a
NewReno sender enters a recovery period when the ECN-CE count increases) and
Appendix B.7 (a rise of the CE count is a new congestion event unless the largest
acknowledged packet was sent before the current recovery period began). RFC 9438
§4.6: "CUBIC MUST continue to reduce cwnd in response to congestion events due to
ECN-Echo ACKs until it reaches a value of 1 MSS".

The link CE-marks only ECN-capable datagrams, and the receiver echoes the marks in
ACK_ECN frames; a sender that does not mark its datagrams ECT, or a receiver that
reports no CE count, never gives the trigger: the example is "not exercised", never
passed. Use of ECN is optional (RFC 9000 §13.4); a sender that uses it must respond.
The links have a deep queue, so that no loss stands in for the marks.
"""

from __future__ import annotations

import math

from hypothesis import given

from harness.schedule import TransferPlan, strategies
from harness.verdict import analysis, ecn, outcomes
from harness.verdict.bounds import BETA
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(1_000_000,))
#: Long enough that the data still flows when a storm drawn by ce_storms() ends.
STORM_PLAN = TransferPlan(sizes=(4_000_000,))
#: How long after the echo's arrival the cut may be logged, in base RTTs, at least
#: MIN_REACT_US: the stack cuts while processing that ACK, but some log the new window
#: only with their next metrics update (quic-go: 17 ms late on a fixture).
REACT_RTTS, MIN_REACT_US = 1.0, 25_000.0


def _loss_based(target) -> float:
    beta = BETA.get(target.cc.family)
    if beta is None or target.cc.family not in ("newreno", "cubic"):
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) is not a loss-based controller: "
                                "its response to ECN is its own")
    outcomes.require(target, "congestion_window")
    return beta


def _echoes(obs, records):
    """The CE echoes the sender received, or not exercised with what was missing."""
    marked = ecn.ce_marked(records)
    if not marked:
        outcomes.not_exercised("the sender's datagrams are not ECN-capable (the link CE-marked none)")
    echoes = ecn.ce_echoes(obs.wire)
    if not echoes:
        outcomes.not_exercised(f"the link CE-marked {len(marked)} datagrams but the receiver's ACKs reported no "
                               "rise of the CE count")
    return echoes


@given(schedule=strategies.ce_marks())
def test_ce_echo_is_a_congestion_event(longlook, target, schedule):
    """Each ACK that raises the CE count for a mark of the link's (not the sender's own
    CE-marked probe, RFC 9002 §8.3) while the sender is not already in a recovery
    period begun after the largest acknowledged packet was sent is followed, within
    one base RTT of its arrival (at least 25 ms: logging lag), by a cut of the window
    (more than 10%). Trigger: a CE echo outside a recovery period."""
    _loss_based(target)
    rtt_us = schedule.phases[0].s2c.delay_us * 2
    react_us = max(REACT_RTTS * rtt_us, MIN_REACT_US)
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace = obs.sender
        if not analysis.cwnd_series(trace):
            outcomes.not_exercised("the sender's log holds no congestion window: not observable in this run")
        records = obs.transfer_records("s2c")
        echoes = _echoes(obs, records)
        marks_us = ecn.echo_times(records, schedule.phases[0].c2s.delay_us)
        judged = ecn.congestion_events(echoes, analysis.send_times(trace), analysis.reductions(trace), react_us,
                                       marks_us)
        if not judged:
            outcomes.not_exercised(f"none of the {len(echoes)} CE echoes was a new congestion event the link caused "
                                   "(inside a recovery period begun after the marked packets were sent, or the "
                                   "sender's own CE-marked probe)")
        ignored = [j for j in judged if j.cut is None]
        check(not ignored, "ce-ignored", lambda: (
            f"{target.id}: {len(ignored)} of {len(judged)} ACKs that raised the CE count outside a recovery period "
            f"were followed by no cut of the window within {react_us / 1e3:.0f} ms; the first reached it at "
            f"{ignored[0].echo.t_us / 1e3:.1f} ms with CE count {ignored[0].echo.ce} (largest acknowledged pn "
            f"{ignored[0].echo.largest}, sent at {ignored[0].sent_us / 1e3:.1f} ms)"
        ), ignored=len(ignored), judged=len(judged))


def _storm(obs, schedule):
    """(series, echoes, mss, floor, start) of a CE storm run: the logged windows, the
    CE echoes that reached the sender from the storm's start to two RTTs after its
    end, the largest datagram, the floor (RFC 9002 §7.2's two datagrams, QUIC's
    stand-in for RFC 9438's 1 MSS) and the window the first echo met."""
    storm, after = schedule.phases[1], schedule.phases[2]
    rtt_us = storm.s2c.delay_us * 2
    series = analysis.cwnd_series(obs.sender)
    if not series:
        outcomes.not_exercised("the sender's log holds no congestion window: not observable in this run")
    storm_records = [r for r in obs.transfer_records("s2c") if storm.start_us <= r.arr_us < after.start_us]
    echoes = [e for e in _echoes(obs, storm_records) if storm.start_us <= e.t_us <= after.start_us + 2 * rtt_us]
    if not echoes:
        outcomes.not_exercised("no CE echo reached the sender during the storm")
    mss = analysis.max_datagram(obs.sender)
    start = next((w for t, w, *_ in reversed(series) if t <= echoes[0].t_us), series[0][1])
    return series, echoes, mss, 2 * mss, start


def _cubic_only(target) -> None:
    if target.cc.family != "cubic":
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}): the rule is RFC 9438's, CUBIC's; every "
                                "loss-based sender's response to each echo is test_ce_echo_is_a_congestion_event's")
    outcomes.require(target, "congestion_window")


@given(schedule=strategies.ce_storms())
def test_persistent_ce_marks_take_the_window_to_its_floor(longlook, target, schedule):
    """CUBIC: with every datagram CE-marked for seconds, the window keeps falling, one
    cut per recovery period, until it reaches the floor: RFC 9438 §4.6 says 1 MSS; RFC 9002
    §7.2's minimum window is two datagrams, so the bound is two datagrams plus one.
    Trigger: CE echoes for long enough that the cuts β allows (one per round trip at
    twice the base RTT, the deep queue's worst, with half again of margin) reach the
    floor from the window the storm began with."""
    _cubic_only(target)
    beta = BETA["cubic"]
    storm, after = schedule.phases[1], schedule.phases[2]
    rtt_us = storm.s2c.delay_us * 2
    with outcomes.rare_trigger(), longlook.run(target, schedule, STORM_PLAN) as obs:
        obs.completed()
        series, echoes, mss, floor, start = _storm(obs, schedule)
        cuts_needed = max(0, math.ceil(math.log(floor / start) / math.log(beta))) if start > floor else 0
        window_us = after.start_us + 2 * rtt_us - echoes[0].t_us
        if cuts_needed * 2 * rtt_us * 1.5 > window_us:
            outcomes.not_exercised(f"the storm left {window_us / 1e6:.2f} s for the {cuts_needed} cuts from "
                                   f"{start} B to the floor")
        lowest = min((w for t, w, *_ in series if echoes[0].t_us <= t <= after.start_us + 2 * rtt_us), default=start)
        check(lowest <= floor + mss, "ce-window-above-floor", lambda: (
            f"{target.id}: every datagram was CE-marked for {(after.start_us - storm.start_us) / 1e6:.1f} s "
            f"({len(echoes)} CE echoes from {echoes[0].t_us / 1e6:.2f} s), and the window fell from {start} B to "
            f"{lowest} B only; the floor is {floor} B (two datagrams), {cuts_needed} cuts of β={beta} away"
        ), lowest=lowest, floor=floor, echoes=len(echoes))


#: Round trips at the floor under the storm that judge the send rate, after SETTLE_RTTS
#: for the last cut's flight to drain.
MIN_FLOOR_RTTS, SETTLE_RTTS = 8, 2
#: The rate a 1 MSS window gives, which RFC 9438 §4.6 asks the sender to go below.
MAX_DATAGRAMS_PER_RTT = 1.0


@given(schedule=strategies.ce_storms())
def test_persistent_ce_marks_at_the_floor_slow_the_sender_further(longlook, target, schedule):
    """CUBIC, RFC 9438 §4.6: "If congestion events indicated by ECN-Echo ACKs persist,
    a sender with a cwnd of 1 MSS MUST reduce its sending rate even further", for
    example with RFC 3168's retransmission timer and exponential backoff. QUIC's floor
    is two datagrams (RFC 9002 §7.2), the stand-in for 1 MSS that
    test_persistent_ce_marks_take_the_window_to_its_floor uses too; whatever the floor,
    "even further" is below the rate a 1 MSS window gives, one datagram per round trip.
    While the logged window stays at the floor (plus one datagram of rounding) with
    every datagram still CE-marked, the bytes the sender puts on the link, after
    SETTLE_RTTS, stay below one of its largest datagrams per smoothed RTT (its logged
    median there; the base RTT where it logs none or less). RFC 3168's timer sends one
    per retransmission timeout, doubling, well below; a sender that holds its floor
    sends up to two. A window that grows again above the floor is no longer the rule's
    case (test_persistent_ce_marks_take_the_window_to_its_floor judges the way down).
    Trigger: the window stayed at the floor under the storm for SETTLE_RTTS +
    MIN_FLOOR_RTTS round trips."""
    _cubic_only(target)
    storm, after = schedule.phases[1], schedule.phases[2]
    base_rtt_us = storm.s2c.delay_us * 2
    with outcomes.rare_trigger(), longlook.run(target, schedule, STORM_PLAN) as obs:
        obs.completed()
        series, echoes, mss, floor, _ = _storm(obs, schedule)
        at_floor = next((t for t, w, *_ in series if echoes[0].t_us <= t < after.start_us and w <= floor + mss), None)
        if at_floor is None:
            outcomes.not_exercised(f"the window never reached the floor ({floor} B) during the storm")
        # The rule speaks of a sender at the floor: judged while the window stays there.
        left = next((t for t, w, *_ in series if at_floor < t < after.start_us and w > floor + mss), after.start_us)
        srtts = [r for t, r in analysis.smoothed_rtt_us(obs.sender) if at_floor <= t < left]
        rate = ecn.rate_at_floor(obs.transfer_records("s2c"), at_floor, left, srtts, base_rtt_us, SETTLE_RTTS)
        if rate.rtts < MIN_FLOOR_RTTS:
            outcomes.not_exercised(f"the window stayed at the floor from {at_floor / 1e6:.2f} s for "
                                   f"{rate.rtts + SETTLE_RTTS:.1f} RTTs only, "
                                   + ("to the storm's end" if left == after.start_us else "then grew again"))
        check(rate.per_rtt <= MAX_DATAGRAMS_PER_RTT, "ce-rate-held-at-floor", lambda: (
            f"{target.id}: the window reached its floor ({floor} B) at {at_floor / 1e6:.2f} s under persistent CE "
            f"marks and stayed there; from {rate.begin_us / 1e6:.2f} s to {rate.end_us / 1e6:.2f} s "
            f"({rate.rtts:.0f} smoothed RTTs of {rate.rtt_us / 1e3:.1f} ms) it sent {rate.sent} B, "
            f"{rate.per_rtt:.2f} of its {rate.largest} B datagrams per RTT: no reduction below the rate of a 1 MSS "
            f"window (RFC 9438 §4.6; RFC 3168's backed-off timer sends one per retransmission timeout)"
        ), datagrams_per_rtt=rate.per_rtt, floor=floor)
