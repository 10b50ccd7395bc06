"""Window reductions and their causes (harness/observe/reductions.py): on the wire
fixtures (real runs at 2% loss: every reduction must trace back to a datagram the link
dropped), and on made-up traces and ground truths for each other cause."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from harness.observe.groundtruth import GroundTruth, PacketRecord, read_log
from harness.testbed.link import REPO_ROOT
from harness.observe import events as ev
from harness.observe import join as J
from harness.observe import qlog
from harness.observe import reductions as R
from test_wire_decode import FIXTURES, load

QLOG_STACKS = ("aioquic", "quic-go", "picoquic", "quinn")  # quiche logs no packet_lost


def fixture_trace(stack: str, tmp: Path) -> ev.Trace:
    """The server's qlog of a wire fixture as a normalised trace on the link's clock."""
    gz = next((FIXTURES / stack).glob("server*.gz"))
    path = tmp / gz.name[:-3]
    path.write_bytes(gzip.decompress(gz.read_bytes()))
    link = FIXTURES / stack / "link.ndjson"
    return qlog.read_trace(path, stack, "server", qlog.read_link_start(link), None, link)


def test_properties_use_this_detection(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO_ROOT))  # properties/ is not under tests/
    from harness.verdict import analysis

    assert analysis.reductions is R.reductions and analysis.Reduction is R.Reduction


@pytest.mark.parametrize("stack", QLOG_STACKS)
def test_fixture_reductions_are_real_drops(stack, tmp_path):
    """Each reduction's declared losses are, by packet number, datagrams the link
    dropped at random (loss_iid); matching by time alone names the same cause."""
    gt = read_log(FIXTURES / stack / "link.ndjson")
    trace = fixture_trace(stack, tmp_path)
    exact = R.reductions_with_cause(trace, gt, J.join(load(stack, "server"), gt))
    assert len(exact) == len(R.reductions(trace)) >= 2
    dropped = {r.idx for r in gt.records if r.dir == "s2c" and r.fate == "dropped"}
    for c in exact:
        assert (c.cause, c.matched_by, c.reasons) == ("drop", "pn", ("loss_iid",)), c.describe()
        assert c.declared and {r.idx for r in c.records} <= dropped, c.describe()
        assert all(r.fate == "dropped" for r in c.records)
    by_time = R.reductions_with_cause(trace, gt)
    assert [(c.cause, c.matched_by) for c in by_time] == [("drop", "time")] * len(exact)
    assert all({r.idx for r in e.records} <= {r.idx for r in t.records} for e, t in zip(exact, by_time))


def test_quiche_without_packet_lost_is_matched_by_time(tmp_path):
    """quiche logs no packet_lost: its cuts are matched by time to drops the sender
    could have learnt of (sent after the previous cut, a base RTT before this one)."""
    run = Path(__file__).parent / "fixtures" / "causes" / "quiche"
    path = tmp_path / "server.sqlog"
    path.write_bytes(gzip.decompress((run / "server.sqlog.gz").read_bytes()))
    link = run / "link.ndjson"
    trace = qlog.read_trace(path, "quiche", "server", qlog.read_link_start(link), None, link)
    gt = read_log(link)
    causes = R.reductions_with_cause(trace, gt)
    assert not trace.of(ev.PacketLost) and len(causes) == 3
    assert all((c.cause, c.matched_by, c.declared, c.reasons) == ("drop", "time", (), ("loss_iid",))
               for c in causes), [c.describe() for c in causes]
    # quiche undid its second cut (CUBIC rollback) 41 ms later, then cut again.
    assert R.undone(trace) == {1}
    # Each drop is offered once to a cut that stands: the first cut it could have
    # caused, or, after an undo, the cut that replaced the undone one.
    idx = [r.idx for i, c in enumerate(causes) if i != 1 for r in c.records]
    assert len(idx) == len(set(idx)) and all(r.arr_us < c.reduction.t_us - 40_000 + R.SEND_TOLERANCE_US
                                             for c in causes for r in c.records)


# --- made-up cases ----------------------------------------------------------------------

MSS = 1200
RTT = 40_000.0


def rec(idx: int, arr_us: float, fate: str = "delivered", reason: str | None = None, marks=(),
        dep_us: float | None = None) -> PacketRecord:
    dep = None if fate != "delivered" else (dep_us if dep_us is not None else arr_us + RTT / 2)
    return PacketRecord("s2c", idx, idx, "udp s>c", "udp", 443, 4000, MSS + 28, arr_us, fate,
                        reason if fate == "dropped" else None, dep, 0, tuple(marks))


def truth(records: list[PacketRecord]) -> GroundTruth:
    # Log order is delivery order (what reorder distances are read from).
    order = sorted(records, key=lambda r: r.dep_us if r.dep_us is not None else r.arr_us)
    phase = {"start_us": 0, "c2s": {"delay_us": RTT / 2}, "s2c": {"delay_us": RTT / 2}}
    return GroundTruth({"schedule": {"phases": [phase]}, "start_unix_ns": 0}, order, None)


def trace(sends: list[float], cwnd: list[tuple[float, int]], lost: list[tuple[float, int]] = ()) -> ev.Trace:
    """Packet pn=i sent at sends[i] (µs), window values at times, (time, pn) losses."""
    events: list[ev.Event] = [ev.PacketSent(t, i, "application", MSS, True) for i, t in enumerate(sends)]
    events += [ev.Metrics(t, congestion_window=w, smoothed_rtt_us=RTT, rtt_variance_us=RTT / 4) for t, w in cwnd]
    events += [ev.PacketLost(t, pn, "application") for t, pn in lost]
    return ev.Trace("made-up", "server", sorted(events, key=lambda e: e.t_us), "test")


def steady(n: int, gap: float = 1_000.0) -> list[float]:
    return [1_000.0 + i * gap for i in range(n)]


def only(causes: list[R.ReductionCause]) -> R.ReductionCause:
    assert len(causes) == 1, [c.describe() for c in causes]
    return causes[0]


def test_queue_overflow_is_a_drop_with_its_reason():
    sends = steady(60)
    records = [rec(i, t, "dropped" if i == 20 else "delivered", "queue_full") for i, t in enumerate(sends)]
    c = only(R.reductions_with_cause(trace(sends, [(0, 60_000), (70_000, 30_000)], [(69_990, 20)]), truth(records)))
    assert (c.cause, c.reasons, c.declared, [r.idx for r in c.records]) == ("drop", ("queue_full",), (20,), [20])


def test_reordered_packet_declared_lost_is_spurious():
    """pn 20 held behind 3 later packets: declared lost, yet delivered."""
    sends = steady(60)
    records = [rec(i, t, marks=("held",) if i == 20 else (), dep_us=t + RTT / 2 + (3_500 if i == 20 else 0))
               for i, t in enumerate(sends)]
    c = only(R.reductions_with_cause(trace(sends, [(0, 60_000), (65_000, 30_000)], [(64_000, 20)]), truth(records)))
    assert (c.cause, c.reasons, [r.idx for r in c.records]) == ("spurious", ("reordered",), [20])


def test_ce_mark_without_loss_is_ecn():
    sends = steady(60)
    records = [rec(i, t, marks=("ce",) if i == 30 else ()) for i, t in enumerate(sends)]
    c = only(R.reductions_with_cause(trace(sends, [(0, 60_000), (75_000, 30_000)]), truth(records)))
    assert (c.cause, [r.idx for r in c.records]) == ("ecn_ce", [30])


def test_blackhole_longer_than_the_persistent_congestion_duration():
    """RFC 9002 §7.6: (40 + 40 + 25) ms × 3 = 315 ms of nothing but drops, window to 2 × MSS."""
    sends = steady(20) + [30_000.0 + i * 40_000 for i in range(12)]  # PTO probes into the blackhole
    records = [rec(i, t, "dropped" if t >= 30_000 else "delivered", "blackhole") for i, t in enumerate(sends)]
    lost = [(500_000.0, pn) for pn in range(20, 32)]
    c = only(R.reductions_with_cause(trace(sends, [(0, 60_000), (500_000, 2 * MSS)], lost), truth(records)))
    assert (c.cause, c.reasons, len(c.records)) == ("persistent_congestion", ("blackhole",), 12)


def test_short_loss_burst_to_the_minimum_window_is_only_a_drop():
    sends = steady(60)
    records = [rec(i, t, "dropped" if 20 <= i < 25 else "delivered", "loss_ge") for i, t in enumerate(sends)]
    lost = [(70_000.0, pn) for pn in range(20, 25)]
    c = only(R.reductions_with_cause(trace(sends, [(0, 60_000), (70_000, 2 * MSS)], lost), truth(records)))
    assert (c.cause, c.reasons) == ("drop", ("loss_ge",))


def test_window_cut_after_an_idle_period_is_an_idle_restart():
    sends = steady(20) + [600_000.0, 600_500.0]
    records = [rec(i, t) for i, t in enumerate(sends)]
    c = only(R.reductions_with_cause(trace(sends, [(0, 60_000), (600_100, 12_000)]), truth(records)))
    assert (c.cause, c.records) == ("idle_restart", ())


def test_reduction_on_a_clean_busy_link_has_no_cause():
    sends = steady(200)
    records = [rec(i, t) for i, t in enumerate(sends)]
    c = only(R.reductions_with_cause(trace(sends, [(0, 60_000), (150_000, 30_000)]), truth(records)))
    assert (c.cause, c.records, c.declared) == ("none", (), ())
    assert "none" in c.describe() and "150" not in c.describe()[:10]


def test_losses_before_the_previous_reduction_are_not_counted_again():
    """Two cuts: the second's declared loss is its own, not the first one's again."""
    sends = steady(200)
    records = [rec(i, t, "dropped" if i in (20, 120) else "delivered", "loss_iid") for i, t in enumerate(sends)]
    tr = trace(sends, [(0, 60_000), (70_000, 30_000), (170_000, 15_000)], [(69_000, 20), (169_000, 120)])
    first, second = R.reductions_with_cause(tr, truth(records))
    assert (first.declared, second.declared) == ((20,), (120,))
    assert [r.idx for r in second.records] == [120]


def test_a_cut_after_the_stack_undid_the_previous_one_may_have_the_same_drops_as_cause():
    """quiche's CUBIC rollback (RFC 9438 §4.9): cut for the drops of 20 and 22, restore,
    cut again. After the restore, 22 (sent before the first cut) may cause the second."""
    sends = steady(200)
    records = [rec(i, t, "dropped" if i in (20, 22) else "delivered", "loss_iid") for i, t in enumerate(sends)]
    tr = trace(sends, [(0, 60_000), (62_000, 42_000), (104_000, 60_000), (104_001, 42_000)])
    assert R.undone(tr) == {0}
    first, second = R.reductions_with_cause(tr, truth(records))
    assert (first.cause, second.cause) == ("drop", "drop")
    assert [r.idx for r in second.records] == [20, 22]


def test_growing_back_in_small_steps_is_no_undo():
    """The window regains its old size by congestion avoidance; a cut with no new drop
    after the first still has no cause."""
    sends = steady(200)
    records = [rec(i, t, "dropped" if i == 20 else "delivered", "loss_iid") for i, t in enumerate(sends)]
    growth = [(70_000 + k * 2_000, 42_000 + k * 1_500) for k in range(1, 13)]  # back to 60_000
    tr = trace(sends, [(0, 60_000), (62_000, 42_000), *growth, (150_000, 30_000)])
    assert R.undone(tr) == set()
    first, second = R.reductions_with_cause(tr, truth(records))
    assert (first.cause, second.cause) == ("drop", "none")


# --- recovery periods -------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["aioquic", "quic-go", "picoquic"])
def test_fixture_recovery_periods_last_about_a_round_trip(stack, tmp_path):
    """A period ends when a packet sent after it began is acknowledged: at least one
    base RTT (40 ms) later, and on these lightly queued links within three."""
    trace = fixture_trace(stack, tmp_path)
    periods = R.recovery_periods(trace)
    assert len(periods) == len(R.reductions(trace)) >= 2  # no cut here falls inside a period
    sent = {p.pn: p.t_us for p in trace.of(ev.PacketSent) if p.space == "application"}
    for p in periods:
        assert 40_000 <= p.end_us - p.start_us <= 120_000, p
        assert sent[p.ended_by_pn] >= p.start_us


def test_quinn_recovery_periods_have_no_end_without_acks(tmp_path):
    periods = R.recovery_periods(fixture_trace("quinn", tmp_path))
    assert periods and all(p.end_us is None and p.ended_by_pn is None for p in periods)


def test_a_cut_inside_an_open_period_opens_none():
    sends = steady(200)
    tr = trace(sends, [(0, 60_000), (70_000, 30_000), (90_000, 15_000), (150_000, 7_000)])
    acks = [ev.PacketAcked(t + RTT, pn, "application") for pn, t in enumerate(sends)]
    tr = ev.Trace(tr.stack, tr.vantage, sorted(tr.events + acks, key=lambda e: e.t_us), tr.source)
    periods = R.recovery_periods(tr)
    # pn 69 (sent at 70 ms) is acked at 110 ms: the cut at 90 ms is inside the first period.
    assert [(p.start_us, p.end_us, p.ended_by_pn) for p in periods] == [(70_000, 110_000, 69),
                                                                        (150_000, 190_000, 149)]


def test_persistent_congestion_is_read_off_the_ground_truth_not_the_window():
    """A stack that only halves after a long blackhole still gets the cause
    persistent_congestion: whether it collapsed the window is the property's question."""
    sends = steady(20) + [30_000.0 + i * 40_000 for i in range(12)]
    records = [rec(i, t, "dropped" if t >= 30_000 else "delivered", "blackhole") for i, t in enumerate(sends)]
    lost = [(500_000.0, pn) for pn in range(20, 32)]
    c = only(R.reductions_with_cause(trace(sends, [(0, 60_000), (500_000, 30_000)], lost), truth(records)))
    assert (c.cause, c.reasons) == ("persistent_congestion", ("blackhole",))


def test_a_drop_too_recent_to_be_known_is_not_the_cause():
    """Without declared losses: a datagram dropped 10 ms before the cut on a 40 ms
    link cannot have been detected yet; one dropped 60 ms before can."""
    sends = steady(100)
    for dropped_at, want in [(89, "none"), (39, "drop")]:  # pn i is sent at (i + 1) ms
        records = [rec(i, t, "dropped" if i == dropped_at else "delivered", "loss_iid")
                   for i, t in enumerate(sends)]
        c = only(R.reductions_with_cause(trace(sends, [(0, 60_000), (100_000, 30_000)]), truth(records)))
        assert c.cause == want, (dropped_at, c.describe())


def test_a_delivered_datagram_breaks_the_persistent_congestion_run():
    """The same 440 ms of drops with one datagram delivered halfway: two runs of
    220 ms, each shorter than the 315 ms duration, so only a drop."""
    sends = steady(20) + [30_000.0 + i * 40_000 for i in range(12)]
    records = [rec(i, t, "dropped" if t >= 30_000 and i != 26 else "delivered", "blackhole")
               for i, t in enumerate(sends)]
    lost = [(500_000.0, pn) for pn in range(20, 32) if pn != 26]
    c = only(R.reductions_with_cause(trace(sends, [(0, 60_000), (500_000, 2 * MSS)], lost), truth(records)))
    assert (c.cause, c.reasons) == ("drop", ("blackhole",))


def _rec(idx: int, arr_ms: float, fate: str):
    from types import SimpleNamespace

    return SimpleNamespace(idx=idx, arr_us=arr_ms * 1000, fate=fate)


def test_the_persistent_congestion_span_runs_between_ack_eliciting_datagrams_only():
    from harness.verdict.analysis import longest_dropped_span

    # A run of drops from 10 to 90 ms whose ends are ACK-only datagrams (not in flight):
    # only the ack-eliciting ones between them, 30 to 70 ms, may bound the period.
    records = [_rec(0, 0, "delivered"), _rec(1, 10, "dropped"), _rec(2, 30, "dropped"), _rec(3, 50, "dropped"),
               _rec(4, 70, "dropped"), _rec(5, 90, "dropped"), _rec(6, 100, "delivered")]
    ack_only = {1: False, 5: False, 2: True, 3: True, 4: True}
    assert longest_dropped_span(records, ack_only, float("-inf"), 200_000) == 40_000
    # Without the capture's word every datagram counts (in the sender's favour).
    assert longest_dropped_span(records, {}, float("-inf"), 200_000) == 80_000
    # A delivered datagram ends a run; an ACK-only drop in the middle does not.
    records[3] = _rec(3, 50, "delivered")
    assert longest_dropped_span(records, ack_only, float("-inf"), 200_000) == 0
    records[3] = _rec(3, 50, "dropped")
    assert longest_dropped_span(records, {**ack_only, 3: False}, float("-inf"), 200_000) == 40_000
    # Only drops after the last collapse and up to this one.
    assert longest_dropped_span(records, ack_only, 30_000, 200_000) == 20_000
    assert longest_dropped_span(records, ack_only, float("-inf"), 50_000) == 20_000


def test_a_padded_certificate_is_larger_by_about_its_padding_and_keeps_its_name(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    from harness.testbed.certs import SERVER_NAME, write_certs
    from harness.virtual.determinism import write_cert

    def der_size(pem: bytes) -> int:
        return len(x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER))

    plain = write_certs(tmp_path / "plain")[0].read_bytes()
    padded = write_certs(tmp_path / "padded", padding=4_000)[0].read_bytes()
    seeded = write_cert(tmp_path / "seeded", SERVER_NAME, 7, padding=4_000)[0].read_bytes()
    assert der_size(plain) < 1_000
    for pem in (padded, seeded):
        names = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
        assert names[0] == SERVER_NAME and len(names) > 100
        assert der_size(pem) >= 4_000
