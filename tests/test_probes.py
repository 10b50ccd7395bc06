"""PTO expiries derived from the wire for a stack that logs none (issue 26 part 1,
harness/observe/probes.py): on fabricated sender traces for each rule, and on a real
aioquic run, where each derived expiry must meet aioquic's own mark of a PTO (it
declares the oldest packet above the largest acknowledged lost when one fires)."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

from harness.observe.derive import fill_from_wire
from harness.observe.events import Metrics, PacketAcked, PacketLost, PacketSent, PtoExpired, Trace
from harness.observe.groundtruth import read_log
from harness.observe.join import wire_trace
from harness.observe.probes import derive_ptos
from harness.observe.qlog import read_trace

sys.path.insert(0, str(Path(__file__).parent))
from test_wire_decode import FIXTURES, load  # noqa: E402

MS = 1000.0
RTT = 40 * MS  # srtt 40 ms, rttvar 2 ms, max_ack_delay 25 ms: a PTO period of 73 ms


def _ack(t: float, pn: int) -> list:
    return [PacketAcked(t, pn), Metrics(t, smoothed_rtt_us=RTT, rtt_variance_us=2 * MS, latest_rtt_us=RTT)]


def _wire(events: list) -> Trace:
    return Trace("any", "server", events, "fabricated")


def test_a_silence_past_the_pto_then_a_send_is_an_expiry_and_they_back_off():
    events = [PacketSent(0.0, 0, size=1200, ack_eliciting=True), *_ack(RTT, 0),
              PacketSent(RTT + 0.1 * MS, 1, size=1200, ack_eliciting=True),
              # The tail is lost: nothing comes back. Probes at 1×, then 2× the period.
              PacketSent(RTT + 80 * MS, 2, size=1200, ack_eliciting=True),
              PacketSent(RTT + 80.05 * MS, 3, size=1200, ack_eliciting=True),  # the same expiry's second probe
              PacketSent(RTT + 80 * MS + 150 * MS, 4, size=1200, ack_eliciting=True)]
    ptos = derive_ptos(_wire(events), 25 * MS)
    assert [e.t_us for e in ptos] == [RTT + 80 * MS, RTT + 230 * MS]
    assert all(e.pto_count is None for e in ptos)  # the wire's count is not the stack's


def test_a_backed_off_expiry_is_not_counted_before_its_time():
    events = [PacketSent(0.0, 0, size=1200, ack_eliciting=True), *_ack(RTT, 0),
              PacketSent(RTT, 1, size=1200, ack_eliciting=True),
              PacketSent(RTT + 80 * MS, 2, size=1200, ack_eliciting=True),
              # 80 ms later: past one period but not the doubled one (a pacer, an app write).
              PacketSent(RTT + 160 * MS, 3, size=1200, ack_eliciting=True)]
    assert [e.t_us for e in derive_ptos(_wire(events), 25 * MS)] == [RTT + 80 * MS]


def test_an_ack_only_send_does_not_restart_the_timer():
    """The peer's own PTO fires into the same silence: the sender acknowledges its
    probe with an ACK-only packet, then its own timer fires. That timer ran from its
    last ack-eliciting send (RFC 9002 §6.2.1), so the probe after it is an expiry
    (aioquic against its own client in a blackhole; it had been missed)."""
    events = [PacketSent(0.0, 0, size=1200, ack_eliciting=True), *_ack(RTT, 0),
              PacketSent(RTT + 0.1 * MS, 1, size=1200, ack_eliciting=True),
              PacketSent(RTT + 78 * MS, 2, size=50, ack_eliciting=False),
              PacketSent(RTT + 79 * MS, 3, size=1200, ack_eliciting=True)]
    assert [e.t_us for e in derive_ptos(_wire(events), 25 * MS)] == [RTT + 79 * MS]


def test_sends_that_answer_acks_or_pace_or_follow_a_loss_timer_are_no_expiries():
    events = [PacketSent(0.0, 0, size=1200, ack_eliciting=True), PacketSent(1 * MS, 1, size=1200, ack_eliciting=True),
              PacketSent(2 * MS, 2, size=1200, ack_eliciting=True),
              *_ack(RTT, 0), *_ack(RTT, 2),  # pn 1 is below the largest acknowledged: its loss timer runs
              PacketSent(RTT + 0.5 * MS, 3, size=1200, ack_eliciting=True),
              # 9/8·RTT after pn 1 was sent its loss timer fires: a retransmission, not a probe.
              PacketSent(RTT + 80 * MS, 4, size=1200, ack_eliciting=True)]
    assert derive_ptos(_wire(events), 25 * MS) == []
    # Nothing in flight: a send after silence (a new request's answer, a keep-alive) arms, not fires.
    idle = [PacketSent(0.0, 0, size=1200, ack_eliciting=True), *_ack(RTT, 0),
            PacketSent(RTT + 500 * MS, 1, size=1200, ack_eliciting=True)]
    assert derive_ptos(_wire(idle), 25 * MS) == []
    # Presumed lost at an ACK, pn 1 arms no loss timer after: the later silence is a PTO's.
    lost = events[:7] + [PacketLost(RTT, 1), events[7], PacketSent(RTT + 120 * MS, 4, size=1200, ack_eliciting=True)]
    assert [e.t_us for e in derive_ptos(_wire(lost), 25 * MS)] == [RTT + 120 * MS]


def test_on_a_real_aioquic_run_each_derived_expiry_meets_aioquics_own_pto_mark(tmp_path):
    d = FIXTURES / "aioquic"
    qlog = tmp_path / "server.qlog"
    qlog.write_bytes(gzip.decompress((d / "server.qlog.gz").read_bytes()))
    trace = read_trace(qlog, "aioquic", "server", read_log(d / "link.ndjson").header["start_unix_ns"])
    view = load("aioquic")
    filled = fill_from_wire(trace, view, {"pto_expired"})
    derived = filled.of(PtoExpired)
    assert derived and "pto_expired" in filled.derived
    # aioquic's mark: a loss of a packet above the largest acknowledged at the time.
    largest, marks = -1, []
    for e in trace.events:
        if isinstance(e, PacketAcked) and e.space == "application":
            largest = max(largest, e.pn)
        elif isinstance(e, PacketLost) and e.space == "application" and e.pn > largest:
            marks.append(e.t_us)
    assert len(marks) == len(derived)
    for mark, pto in zip(marks, derived):
        assert 0 <= pto.t_us - mark < 5 * MS, (mark, pto)
    # And the wire itself, unaligned, finds the same.
    wire = wire_trace(view, 0, "server", "aioquic", losses=True)
    assert len(derive_ptos(wire, view.connections[0].max_ack_delay_us["c2s"])) == len(derived)
