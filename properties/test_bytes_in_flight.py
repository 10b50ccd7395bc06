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
count at some point within ORDER_SLACK_US of the report in the sender's own log.
"""

from __future__ import annotations

import bisect

from hypothesis import example, given

from harness.observe.events import Metrics, PacketAcked, PacketLost, PacketSent
from harness.schedule import TransferPlan, strategies
from harness.verdict import analysis, outcomes
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(1_000_000,))
#: Stacks log an ACK's effect and the ACK's packet microseconds apart, in either
#: order: events this close are taken as simultaneous.
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
        for t, value, expected in _replay(trace, counted_on_wire(obs.wire)):
            checked += 1
            if not any(abs(value - e) <= mss for e in expected):
                mismatches.append((t, value, min(expected), max(expected)))
        check(checked, "log-lacks-event", f"{target.id}: no bytes_in_flight reported after the handshake",
              event="bytes_in_flight")
        check(not mismatches, "bytes-in-flight-mismatch", lambda: (
            f"{target.id}: {len(mismatches)} of {checked} reported bytes_in_flight differ by more than a datagram "
            f"({mss} B) from the sum of its unacknowledged, not-lost ack-eliciting packets on the wire; first at "
            f"t={mismatches[0][0] / 1e6:.4f} s: reported {mismatches[0][1]}, expected "
            f"{mismatches[0][2]}…{mismatches[0][3]} within ±{ORDER_SLACK_US / 1e3:.0f} ms of the sender's own log"
        ), mismatch_share=len(mismatches) / checked)


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


def _replay(trace, on_wire: dict[int, int]):
    """(t, reported value, expected values within ±ORDER_SLACK_US) for every report
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
        lo = max(bisect.bisect_left(times, t - ORDER_SLACK_US) - 1, 0)
        hi = bisect.bisect_right(times, t + ORDER_SLACK_US)
        yield t, value, [v for _, v in expected[lo:hi]]
