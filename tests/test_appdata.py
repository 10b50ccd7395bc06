"""When the sender's application ran dry (harness/observe/appdata.py) and how trace
validation turns that into the model's SetAppLimited steps (harness/model/tracefile.py)."""

from __future__ import annotations

from types import SimpleNamespace

from harness.model import coverage, tracefile, validate
from harness.observe.appdata import AppMarks, app_marks
from harness.observe.events import Metrics, PacketAcked, PacketLost, PacketSent, PtoExpired
from harness.observe.quic_frames import Ack, Stream


def _dgram(pn, *frames, direction="s2c", entered=True, conn=0):
    packet = SimpleNamespace(space="application", pn=pn, frames=frames)
    return SimpleNamespace(entered=entered, direction=direction, conn=conn, packets=[packet])


def test_dry_after_the_last_responses_fin_and_resumed_by_the_next_response():
    view = SimpleNamespace(datagrams=[
        _dgram(1, Stream(0, 0, 1000, False)),
        _dgram(2, Stream(3, 0, 10, False)),            # a server-initiated stream: no response
        _dgram(3, Stream(0, 1000, 500, True)),          # the first response ends: dry
        _dgram(4, Ack(3, ((1, 3),), 0)),                # an ACK-only packet
        _dgram(5, Stream(0, 1000, 500, True)),          # a retransmission: not new
        _dgram(6, Stream(4, 0, 800, False)),            # the next response begins: resumed
        _dgram(7, Stream(8, 0, 100, True)),             # a third, whole in one packet...
        _dgram(8, Stream(4, 800, 100, True)),           # ...the second ends last: dry again
        _dgram(9, Stream(12, 0, 10, False), conn=1),    # another connection: ignored
        _dgram(10, Stream(16, 0, 10, False), direction="c2s", entered=False)])
    marks = app_marks(view)
    assert marks.dry_after == {("application", 3), ("application", 8)}
    assert marks.resume_at == {("application", 6)}


def _run(*tail):
    """Ten packets of 1200 B in flight under a window of 12000 B, the last ending the
    response; then `tail`."""
    return validate.Trace("aioquic", "server", [
        Metrics(0.0, congestion_window=12000),
        *[PacketSent(1.0 + pn, pn, size=1200, ack_eliciting=True) for pn in range(10)],
        *tail], "x")


DRY = AppMarks(frozenset({("application", 9)}), frozenset({("application", 10)}))


def test_a_dry_sender_is_application_limited_once_under_half_its_window_is_in_flight():
    acks = [PacketAcked(20.0 + pn, pn) for pn in range(7)]
    log = tracefile.from_trace(_run(*acks, PacketSent(30.0, 10, size=1200, ack_eliciting=True),
                                    PacketAcked(40.0, 10)), "newreno", app=DRY)
    kinds = [(r.k, r.el) for r in log.records if r.k in ("app", "acked", "sent")][10:]
    # Before each ACK 12000 B are in flight, then 10800, 9600, 8400, 7200, 6000, 4800:
    # the seventh finds less than half the window, so the mark goes before its record,
    # and the next response's first packet clears it.
    assert kinds == [("acked", True)] * 6 + [("app", True), ("acked", True), ("app", False), ("sent", True),
                                                 ("acked", True)]
    verdict = validate.validate_log(log, _run())
    assert verdict.accepted, verdict.describe()


def test_growth_while_application_limited_is_its_own_deviation():
    acks = [PacketAcked(20.0 + pn, pn) for pn in range(7)]
    trace = _run(*acks, Metrics(30.0, congestion_window=13200))
    verdict = validate.validate_log(tracefile.from_trace(trace, "newreno", app=DRY), trace)
    assert not verdict.accepted and verdict.mismatch.kind == "window-growth-while-app-limited"
    assert verdict.mismatch.state == "ApplicationLimited"
    # Without the marks the same growth is slow start's (acknowledged bytes allow it).
    assert validate.validate_log(tracefile.from_trace(trace, "newreno"), trace).accepted


def test_a_loss_or_a_probe_ends_the_dry_spell():
    acks = [PacketAcked(20.0 + pn, pn) for pn in range(2, 8)]
    for event in (PacketLost(19.0, 0), PtoExpired(19.0, pto_count=1)):
        log = tracefile.from_trace(_run(PacketAcked(18.0, 1), event, *acks), "newreno", app=DRY)
        assert not [r for r in log.records if r.k == "app"], event
    # Once set, a loss clears it: the spec's OnPacketsLost does, so the model takes the
    # loss from ApplicationLimited (a transition directed generation aims at).
    trace = _run(*[PacketAcked(20.0 + pn, pn) for pn in range(1, 8)], PacketLost(30.0, 0))
    log = tracefile.from_trace(trace, "newreno", app=DRY)
    assert [(r.k, r.el) for r in log.records if r.k == "app"] == [("app", True)]
    verdict = validate.validate_log(log, trace)
    assert verdict.accepted, verdict.describe()
    assert ("ApplicationLimited", "OnPacketsLost", "Recovery") in coverage.transitions(verdict)
