"""The bytes in flight a stack reports are the bytes on the wire.

RFC 9002 §2 and Appendix B.2: bytes_in_flight is the sum of the sizes of sent
packets that are ack-eliciting (or carry PADDING) and are neither acknowledged nor
declared lost; the congestion controller limits exactly this. A stack whose count
drifts from the wire (packets never removed, acknowledged bytes double-counted)
sends too much or too little for its window.

Compared with the wire view (the sender side's decrypted capture, harness.observe.join
.wire_trace) on links that drop and reorder nothing (jitter that keeps the order), so
no loss declaration the wire cannot see separates the two. Each reported value must lie within one datagram of the wire's
count at some instant within TIME_SLACK_US of the report (the stack logs a send just
before the datagram reaches the capture, an ACK just after).
"""

from __future__ import annotations

import bisect

import pytest
from hypothesis import example, given

from harness import strategies
from harness.observe.events import Metrics
from harness.observe.join import wire_trace
from harness.topology import TransferPlan
from properties import analysis

PLAN = TransferPlan(sizes=(1_000_000,))
TIME_SLACK_US = 5_000


@example(schedule=strategies.CLEAN_LOSSLESS_LINK)
@given(schedule=strategies.delay_jitter(lossless=True, reorders=False))
def test_bytes_in_flight_match_the_wire(longlook, target, schedule):
    """Every bytes_in_flight the sender reports after the handshake is within one
    datagram of the wire's count around that time."""
    with longlook.run(target, schedule, PLAN) as obs:
        assert obs.result.ok, f"{target.id}: transfer failed: {obs.result.reason}"
        drops = [r for r in obs.ground_truth.records if r.fate == "dropped"]
        assert not drops, f"the lossless link dropped {len(drops)} datagrams: a harness fault"
        trace = obs.sender
        wire = [(m.t_us, m.bytes_in_flight) for m in wire_trace(obs.wire).of(Metrics) if m.bytes_in_flight is not None]
        reported = [(m.t_us, m.bytes_in_flight) for m in trace.of(Metrics) if m.bytes_in_flight is not None]
        if not reported:
            pytest.skip(f"{target.stack.name} reports no bytes_in_flight")
        mss = analysis.max_datagram(trace)
        # After the first application-space ACK the handshake packets have left the
        # flight on both sides (their accounting differs between stacks before that).
        acked = analysis.new_ack_arrivals(obs.wire)
        start = acked[0] if acked else 0.0
        times = [t for t, _ in wire]
        mismatches = []
        for t, value in reported:
            if t < start + TIME_SLACK_US:
                continue
            lo, hi = bisect.bisect_left(times, t - TIME_SLACK_US), bisect.bisect_right(times, t + TIME_SLACK_US)
            near = [w for _, w in wire[max(lo - 1, 0):hi]]
            if near and not any(abs(value - w) <= mss for w in near):
                mismatches.append((t, value, min(near), max(near)))
        assert not mismatches, (
            f"{target.id}: {len(mismatches)} of {len(reported)} reported bytes_in_flight differ from the wire by more "
            f"than a datagram ({mss} B); first at t={mismatches[0][0] / 1e6:.4f} s: reported {mismatches[0][1]}, "
            f"wire {mismatches[0][2]}…{mismatches[0][3]} within ±{TIME_SLACK_US / 1e3:.0f} ms"
        )
