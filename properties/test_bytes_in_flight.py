"""The bytes in flight a stack reports are the bytes its packets put on the wire.

RFC 9002 §2 and Appendix B.2: bytes_in_flight is the sum of the sizes of sent
packets that are ack-eliciting (or carry PADDING) and are neither acknowledged nor
declared lost; the congestion controller limits exactly this. A stack whose count
drifts (packets never removed, acknowledged bytes removed twice, sizes miscounted)
sends too much or too little for its window.

The expected count replays the sender's own log in its own order — each packet it
sent, each ACK frame it received (the packets it newly acknowledges), each loss it
declared — with every packet's size and whether it counts in flight taken from the
wire (the sender side's decrypted capture, matched by packet number). So the check
does not depend on when the capture saw a datagram, only on what the stack counted.
Every reported value after the handshake must be within one datagram of the expected
count at some point within ORDER_SLACK_US of the report in the sender's own log
(longer where the stack's threads log further apart: Dialect.LOG_ORDER_SLACK_US).
"""

from __future__ import annotations

import bisect

from hypothesis import example, given
from hypothesis import strategies as st

from harness.observe.events import Metrics, PacketAcked, PacketLost, PacketSent
from harness.schedule import TransferPlan, strategies
from harness.schedule.strategies import BaseLink
from harness.verdict import analysis, outcomes
from harness.verdict.blackhole import hit_the_transfer, probe_datagrams, quiet_period
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(1_000_000,))
#: Long enough that a blackhole drawn by long_blackholes() falls inside the transfer.
DARK_PLAN = TransferPlan(sizes=(2_000_000,))
#: Probe datagrams the sender must have sent before a report judges them: the reports
#: are compared within one datagram, so one uncounted probe would hide in that slack.
PROBES_TO_JUDGE = 2
#: Stacks log an ACK's effect and the ACK's packet microseconds apart, in either
#: order: events this close are taken as simultaneous. A stack whose threads log
#: further apart says so (Dialect.LOG_ORDER_SLACK_US: kwik).
ORDER_SLACK_US = 1_000


@example(schedule=strategies.CLEAN_LOSSLESS_LINK)
@given(schedule=strategies.delay_jitter(lossless=True, reorders=False))
def test_bytes_in_flight_match_the_wire(longlook, target, schedule):
    """Every bytes_in_flight the sender reports after the handshake is within one
    datagram of what its sends, acknowledgements and losses put in flight."""
    outcomes.require(target, "ack_frames")
    outcomes.require(target, "bytes_in_flight")
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace = obs.sender
        check(trace.of(PacketAcked), "log-lacks-event", f"{target.id}: no ACK frame in the sender's qlog, which logs them",
              event="ack_frames")
        check(any(m.bytes_in_flight is not None for m in trace.of(Metrics)), "log-lacks-event",
              f"{target.id}: no bytes_in_flight in the sender's qlog, which reports it", event="bytes_in_flight")
        mss = analysis.max_datagram(trace)
        mismatches, checked = [], 0
        slack = analysis.log_order_slack_us(target, ORDER_SLACK_US)
        for t, value, expected in _replay(trace, counted_on_wire(obs.wire), slack):
            checked += 1
            if not any(abs(value - e) <= mss for e in expected):
                mismatches.append((t, value, min(expected), max(expected)))
        check(checked, "log-lacks-event", f"{target.id}: no bytes_in_flight reported after the handshake",
              event="bytes_in_flight")
        check(not mismatches, "bytes-in-flight-mismatch", lambda: (
            f"{target.id}: {len(mismatches)} of {checked} reported bytes_in_flight differ by more than a datagram "
            f"({mss} B) from the sum of its unacknowledged, not-lost ack-eliciting packets on the wire; first at "
            f"t={mismatches[0][0] / 1e6:.4f} s: reported {mismatches[0][1]}, expected "
            f"{mismatches[0][2]}…{mismatches[0][3]} within ±{slack / 1e3:.0f} ms of the sender's own log"
        ), mismatch_share=len(mismatches) / checked)


@example(schedule=strategies.dark(BaseLink(), 0, 600, 2000))
@given(schedule=st.one_of(strategies.long_blackholes(), strategies.blackholes()))
def test_probes_count_in_flight(longlook, target, schedule):
    """RFC 9002 §7.5: the probes a PTO sends past the congestion window count as
    additionally in flight. During a blackhole of the data direction (no
    acknowledgement with news for the sender), every bytes_in_flight the sender
    reports once it has sent two probe datagrams is within one datagram of what its
    sends and declared losses put in flight, probes included (the same replay of its
    own log as test_bytes_in_flight_match_the_wire, sizes from the wire). A sender
    that leaves its probes out falls a datagram further behind with each one.
    Trigger: a report in the quiet period after the sender's timers had sent at least
    two datagrams with ack-eliciting packets."""
    outcomes.require(target, "ack_frames")
    outcomes.require(target, "bytes_in_flight")
    outcomes.require(target, "packet_lost")
    with longlook.run(target, schedule, DARK_PLAN, timeout_s=60) as obs:
        obs.completed()
        hit_the_transfer(obs, schedule)
        trace, view = obs.sender, obs.wire
        quiet_from, quiet_to = quiet_period(obs, schedule)
        probes, _ = probe_datagrams(obs, schedule)
        eliciting_probes = [d for d in probes if any(p.ack_eliciting for p in d.packets)]
        if len(eliciting_probes) < PROBES_TO_JUDGE:
            outcomes.not_exercised(f"the sender's timers sent {len(eliciting_probes)} datagram(s) with ack-eliciting "
                                   f"packets during the blackhole, fewer than {PROBES_TO_JUDGE}")
        # The send of the PROBES_TO_JUDGE-th probe datagram as the sender logged it
        # (its own clock, as its reports).
        nth = {p.pn for p in eliciting_probes[PROBES_TO_JUDGE - 1].packets if p.space == "application"}
        sent_at = [e.t_us for e in trace.of(PacketSent) if e.space == "application" and e.pn in nth]
        if not sent_at:
            outcomes.not_exercised("the sender's log has no send of its second probe datagram")
        slack = analysis.log_order_slack_us(target, ORDER_SLACK_US)
        judged_from = min(sent_at) + slack
        # The wire's quiet period ends at the first news reaching the sender; its log's
        # reports are on its own clock, compared up to that instant (less the slack).
        mss = analysis.max_datagram(trace)
        checked, behind = 0, []
        for t, value, expected in _replay(trace, counted_on_wire(view), slack):
            if not judged_from <= t < quiet_to - slack:
                continue
            checked += 1
            if not any(abs(value - e) <= mss for e in expected):
                behind.append((t, value, min(expected), max(expected)))
        if not checked:
            outcomes.not_exercised("the sender reported no bytes_in_flight after its second probe and before the "
                                   "blackhole's news")
        first = behind[0] if behind else None
        worst = max(behind, key=lambda b: min(abs(b[1] - b[2]), abs(b[1] - b[3])), default=None)
        difference = min(worst[1] - worst[2], worst[1] - worst[3], key=abs) if worst else 0
        silent = _carried_again(trace, view, quiet_from, worst[0]) if worst else 0
        check(not behind, "probes-not-in-flight", lambda: (
            f"{target.id}: {len(behind)} of {checked} bytes_in_flight reports during the blackhole, after "
            f"{len(eliciting_probes)} probe datagram(s) from +{(eliciting_probes[0].t_us - quiet_from) / 1e3:.0f} ms "
            f"after the last news, differ by more than a datagram ({mss} B) from its sends (probes included) less "
            f"its declared losses; first at t={first[0] / 1e6:.4f} s: reported {first[1]}, expected "
            f"{first[2]}…{first[3]}; at the worst report {difference:+d} B, of which the packets whose data the "
            f"probes carried again, never declared lost, make {silent} B (a sender that drops those from flight "
            f"when a PTO fires, without a packet_lost, shows that much)"
        ),  # reported less expected at the worst report: negative where probes are left out
            difference=difference,
            # What the difference leaves once packets whose data the probes carried
            # again (and never declared lost) are taken out of flight: a sender that
            # removes them silently at its PTO (RFC 9002 §6.2) shows about 0 here, one
            # that leaves its probes out a probe's size below.
            unexplained=difference + silent, probes=len(eliciting_probes))


def _carried_again(trace, view, quiet_from: float, until_us: float) -> int:
    """Bytes (wire sizes) of the application packets still in flight by the sender's
    own log at `until_us` (sent, neither acknowledged nor declared lost) whose STREAM
    data a packet sent in the quiet period before then carried again. In the quiet
    period every such packet is a probe: some follow a client datagram too closely to
    be told from an answer by timing alone, so all of them count here."""
    carriers = [p for d in view.datagrams if d.entered and d.direction == "s2c" and quiet_from < d.t_us < until_us
                for p in d.packets if p.space == "application"]
    carried = [(f.stream_id, f.offset, f.offset + f.length) for p in carriers
               for f in p.frames if getattr(f, "name", "") == "stream"]
    carrier_pns = {p.pn for p in carriers}
    flying: set[int] = set()
    for e in sorted(trace.events, key=lambda e: e.t_us):
        if e.t_us >= until_us:
            break
        if isinstance(e, PacketSent) and e.space == "application":
            flying.add(e.pn)
        elif isinstance(e, (PacketAcked, PacketLost)) and e.space == "application":
            flying.discard(e.pn)
    total = 0
    for d in view.datagrams:
        if not (d.entered and d.direction == "s2c"):
            continue
        for p in d.packets:
            if p.space != "application" or p.pn not in flying or p.pn in carrier_pns:
                continue
            if any(getattr(f, "name", "") == "stream" and any(
                    sid == f.stream_id and lo < f.offset + f.length and f.offset < hi for sid, lo, hi in carried)
                   for f in p.frames):
                total += p.size
    return total


def counted_on_wire(view) -> dict[int, int]:
    """Application-space packet number → size, for the sender's packets that count in
    flight (RFC 9002 §2: ack-eliciting, or carrying PADDING)."""
    out = {}
    for d in view.datagrams:
        if d.entered and d.direction == "s2c":
            for p in d.packets:
                if p.space == "application" and p.pn is not None and (
                        p.ack_eliciting or any(getattr(f, "name", "") == "padding" for f in p.frames)):
                    out[p.pn] = p.size
    return out


def _replay(trace, on_wire: dict[int, int], slack_us: float = ORDER_SLACK_US):
    """(t, reported value, expected values within ±slack_us) for every report
    once the first application-space ACK has been logged (before it, stacks differ in
    when handshake packets leave the flight)."""
    flying: dict[int, int] = {}
    expected: list[tuple[float, int]] = [(float("-inf"), 0)]
    reports: list[tuple[float, int]] = []
    started = False
    for e in sorted(trace.events, key=lambda e: e.t_us):
        if isinstance(e, PacketSent) and e.space == "application" and e.pn in on_wire:
            flying[e.pn] = on_wire[e.pn]
        elif isinstance(e, (PacketAcked, PacketLost)) and e.space == "application":
            started = started or isinstance(e, PacketAcked)
            flying.pop(e.pn, None)
        elif isinstance(e, Metrics) and e.bytes_in_flight is not None and started:
            reports.append((e.t_us, e.bytes_in_flight))
            continue
        else:
            continue
        expected.append((e.t_us, sum(flying.values())))
    times = [t for t, _ in expected]
    for t, value in reports:
        lo = max(bisect.bisect_left(times, t - slack_us) - 1, 0)
        hi = bisect.bisect_right(times, t + slack_us)
        yield t, value, [v for _, v in expected[lo:hi]]
