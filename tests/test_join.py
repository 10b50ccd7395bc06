"""The ground-truth join and its derived facts, on the five stacks' fixtures, on small
made-up cases, and (netns) on a live run with one server datagram held behind 2 later
ones: the join must show no real drop, name exactly the losses the stack declared, and
blame any window reduction on the reorder."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.observe.groundtruth import GroundTruth, PacketRecord, read_log
from harness.testbed.link import REPO_ROOT
from harness.observe import events as ev
from harness.observe import join as J
from harness.observe import reductions as R
from harness.observe.qlog import read_link_start, read_run, read_trace
from harness.observe.quic_frames import Stream
from harness.observe.wire import read_wire
from test_wire_decode import FIXTURES, STACKS, load

QLOG_STACKS = ("aioquic", "quic-go", "picoquic", "quinn")  # quiche logs no packet_lost


def declared_losses(path: Path) -> list[ev.PacketLost]:
    """packet_lost events of a qlog (JSON or JSON-SEQ, gzipped or not, any dialect seen)."""
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode()
    if ".sqlog" in path.name:
        docs = [json.loads(x) for x in text.replace("\x1e", "\n").splitlines() if x.strip()]
    else:
        docs = [json.loads(text)]
    found: list[dict] = []

    def walk(o):
        if isinstance(o, dict):
            if str(o.get("name", "")).endswith("packet_lost"):
                found.append(o["data"])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            if len(o) == 4 and o[2] == "packet_lost":  # picoquic: [time, category, event, data]
                found.append(o[3])
            for v in o:
                walk(v)

    for d in docs:
        walk(d)
    return [ev.PacketLost(0.0, x.get("header", x)["packet_number"]) for x in found]


def fixture_join(stack: str, side: str = "server") -> tuple[J.Join, GroundTruth]:
    gt = read_log(FIXTURES / stack / "link.ndjson")
    return J.join(load(stack, side), gt), gt


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("side", ["server", "client"])
def test_joined_counts_equal_the_emulators(stack, side):
    j, gt = fixture_join(stack, side)
    mine = [r for r in gt.records if r.dir == j.direction and r.fate != "duplicate"]
    by_flow = Counter(r.flow for r in mine if r.proto == "udp")
    assert j.datagrams_by_flow == dict(by_flow)
    other = sum(1 for r in mine if r.proto != "udp")  # e.g. quic-go's ICMP port unreachable at the end
    assert j.datagrams + other == gt.summary[j.direction]["arrived"]
    dropped_idx = {r.idx for r in mine if r.fate == "dropped"}
    assert {p.idx for p in j.packets if p.fate == "dropped"} == dropped_idx
    assert sum(gt.summary[j.direction]["dropped"].values()) == len(dropped_idx)
    for p in j.packets:
        r = next(r for r in mine if r.idx == p.idx) if p.fate == "dropped" else None
        assert r is None or r.reason == p.reason
    # Per fate, the joined datagrams (one per idx, coalesced packets share it) plus the
    # link's non-UDP packets make up the emulator's own counters.
    fates = Counter({p.idx: p.fate for p in j.packets}.values())
    others = Counter(r.fate for r in mine if r.proto != "udp")
    for fate in ("delivered", "in_flight"):
        assert fates[fate] + others[fate] == gt.summary[j.direction][fate], fate


@pytest.mark.parametrize("stack", STACKS)
def test_one_packet_per_1rtt_datagram_and_delivery_times(stack):
    """Every 1-RTT packet the server sent is joined once. Delivery times: the client's
    packets, joined from the client's capture, reach the server's capture when the log
    says they left the link (give or take the router's lateness)."""
    j, gt = fixture_join(stack, "server")
    view = load(stack, "server")
    sent_1rtt = [p.pn for d in view.datagrams if d.entered for p in d.packets if p.kind == "1rtt"]
    assert sorted(p.pn for p in j.packets if p.space == "application") == sorted(sent_1rtt)
    jc, _ = fixture_join(stack, "client")
    arrived = {p.pn: d.t_us for d in view.datagrams if not d.entered for p in d.packets
               if p.space == "application"}
    late = [arrived[p.pn] - p.delivered_us for p in jc.packets if p.fate == "delivered" and p.space == "application"]
    # Written when due: up to one delivery slice (50 µs) early, late by the router's lateness.
    assert late and all(-60 <= x < 5_000 for x in late)


@pytest.mark.parametrize("stack", QLOG_STACKS)
def test_qlog_packet_sent_matches_the_capture(stack, tmp_path):
    """The server's normalised qlog trace has exactly one packet_sent per 1-RTT packet
    in its capture, and on the link's clock each is logged shortly before the link
    reads its datagram (picoquic and quinn fall back to the link clock, aligned on the
    first datagram, so theirs may come out slightly early)."""
    gz = next((FIXTURES / stack).glob("server*.gz"))
    path = tmp_path / gz.name[:-3]
    path.write_bytes(gzip.decompress(gz.read_bytes()))
    link = FIXTURES / stack / "link.ndjson"
    trace = read_trace(path, stack, "server", read_link_start(link), None, link)
    logged = {e.pn: e.t_us for e in trace.of(ev.PacketSent) if e.space == "application"}
    view = load(stack, "server")
    wire = [(p.pn, d.t_us) for d in view.datagrams if d.entered for p in d.packets if p.kind == "1rtt"]
    assert sorted(pn for pn, _ in wire) == sorted(logged)
    lags = [t - logged[pn] for pn, t in wire]
    assert all(-1_000 < lag < 10_000 for lag in lags), (min(lags), max(lags))


@pytest.mark.parametrize("stack", QLOG_STACKS)
def test_declared_losses_against_the_ground_truth(stack):
    j, _ = fixture_join(stack)
    declared = declared_losses(next((FIXTURES / stack).glob("server*.gz")))
    audit = J.audit_losses(j, declared)
    assert audit.declared == len(declared) > 0
    assert audit.unknown_declarations == []
    assert len(audit.spurious_declarations) + len(audit.real_declarations) == len(declared)
    # Each real drop is either declared or listed as undeclared, never both.
    real = {p.pn for p in audit.real_declarations}
    undeclared = {p.pn for p in audit.undeclared_drops}
    assert real.isdisjoint(undeclared)
    assert real | undeclared == {p.pn for p in j.dropped if p.ack_eliciting}


def test_quiche_drops_are_undeclared_without_qlog_losses():
    j, _ = fixture_join("quiche")
    audit = J.audit_losses(j, [])
    assert [p.pn for p in audit.undeclared_drops] == [p.pn for p in j.dropped if p.ack_eliciting] != []


@pytest.mark.parametrize("stack", STACKS)
def test_flow_shares_and_goodput(stack):
    j, gt = fixture_join(stack)
    shares = J.flow_shares(gt, "s2c", 100_000, [j])
    assert abs(sum(f.share for f in shares) - 1) < 1e-9
    quic = shares[0]
    assert quic.proto == "udp" and quic.delivered_bytes == sum(quic.delivered)
    assert 200_000 <= sum(quic.goodput) < 200_100  # the object once, however often sent


@pytest.mark.parametrize("stack", STACKS)
def test_wire_trace(stack):
    view = load(stack, "server")
    trace = J.wire_trace(view, stack=stack)
    assert trace.notes and trace.notes[0].startswith("source: wire")
    sent = trace.of(ev.PacketSent)
    one_rtt = sum(1 for d in view.datagrams if d.entered for p in d.packets if p.kind == "1rtt")
    assert sum(1 for e in sent if e.space == "application") == one_rtt
    bif = [e.bytes_in_flight for e in trace.of(ev.Metrics) if e.bytes_in_flight is not None]
    assert min(bif) >= 0 and max(bif) > 20_000
    cwnd = [e.congestion_window for e in trace.of(ev.Metrics) if e.congestion_window]
    assert cwnd and max(cwnd) <= max(bif)
    srtt = [e.smoothed_rtt_us for e in trace.of(ev.Metrics) if e.smoothed_rtt_us]
    assert 40_000 <= srtt[-1] < 120_000  # 40 ms of path delay plus queueing
    assert all(a.t_us <= b.t_us for a, b in zip(trace.events, trace.events[1:]))


def test_capture_of_another_run_is_refused():
    gt = read_log(FIXTURES / "quic-go" / "link.ndjson")
    with pytest.raises(J.JoinError, match="not of the same run"):
        J.join(load("aioquic", "server"), gt)


# --- made-up cases ----------------------------------------------------------------------


def _rec(idx: int, fate: str, dep: float | None, **kw) -> PacketRecord:
    base = dict(dir="s2c", idx=idx, fidx=idx, flow="udp a>b", proto="udp", sport=1, dport=2, size=1000,
                arr_us=float(idx), fate=fate, reason="loss_iid" if fate == "dropped" else None, dep_us=dep, qbytes=0)
    base.update(kw)
    return PacketRecord(**base)


def test_reorder_distance_follows_log_order():
    # idx 1 held behind 2 and 3 (logged after them); 4 dropped; 5 normal.
    records = [_rec(0, "delivered", 10), _rec(2, "delivered", 12), _rec(3, "delivered", 13),
               _rec(1, "delivered", 13, marks=("held",)), _rec(4, "dropped", None), _rec(5, "delivered", 15)]
    assert J.reorder_distances(records, "s2c") == {1: 2}


def test_spurious_retransmissions_need_a_delivered_copy():
    def fate(pn, fate, streams):
        return J.PacketFate(0, "s2c", "application", pn, 1200, True, streams, pn, pn, "f", float(pn), fate,
                            None, float(pn) + 5 if fate == "delivered" else None, False, 0, 0.0, ())
    packets = [fate(1, "delivered", (Stream(0, 0, 1000, False),)),
               fate(2, "dropped", (Stream(0, 1000, 1000, False),)),
               fate(3, "delivered", (Stream(0, 1000, 1000, False),)),  # real retransmission of 2
               fate(4, "delivered", (Stream(0, 500, 1000, False),))]  # repeats delivered bytes of 1 and 3
    found = J.spurious_retransmissions(packets)
    assert [(s.pn, s.original_pn, s.length) for s in found] == [(4, 1, 500)]


def test_flow_shares_include_tcp_flows():
    tcp = dict(flow="tcp c:1>s:2", proto="tcp")
    records = [_rec(0, "delivered", 50_000.0), _rec(1, "delivered", 150_000.0, **tcp),
               _rec(2, "delivered", 160_000.0, **tcp), _rec(3, "dropped", None, **tcp)]
    shares = J.flow_shares(GroundTruth({}, records, None), "s2c", 100_000)
    assert [(f.proto, f.delivered_bytes, round(f.share, 3), f.delivered) for f in shares] == [
        ("tcp", 2000, 0.667, [0, 2000]), ("udp", 1000, 0.333, [1000, 0])]
    assert all(f.goodput is None for f in shares)  # no join given: delivered bytes only


def test_goodput_coverage_counts_bytes_once():
    spans: list[list[int]] = []
    assert [J._cover(spans, a, b) for a, b in [(0, 10), (20, 30), (5, 25), (0, 30), (30, 31)]] == [10, 10, 10, 0, 1]
    assert spans == [[0, 31]]


# --- live: a scripted reorder (netns) ----------------------------------------------------

HOLD_SCHEDULE = {
    "seed": 1,
    "phases": [{"start_us": 0,
                "c2s": {"rate_bps": 20_000_000, "delay_us": 20_000, "queue_bytes": 100_000},
                "s2c": {"rate_bps": 20_000_000, "delay_us": 20_000, "queue_bytes": 100_000}}],
    "actions": [{"dir": "s2c", "flow": {"proto": "udp"}, "index": 60, "action": "hold", "k": 2}],
}


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.parametrize("stack,k", [("aioquic", 2), ("quic-go", 2), ("quic-go", 4)])
def test_scripted_reorder_is_told_from_loss(netns_ready, tmp_path, stack, k):
    schedule = json.loads(json.dumps(HOLD_SCHEDULE))
    schedule["actions"][0]["k"] = k
    (tmp_path / "schedule.json").write_text(json.dumps(schedule))
    out = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "harness.cli", "transfer", "--impl", stack, "--bytes", "200KB",
                    "--schedule", str(tmp_path / "schedule.json"), "--out", str(out)],
                   cwd=REPO_ROOT, check=True, timeout=180)
    gt = read_log(out / "link.ndjson")
    j = J.join(read_wire(out / "pcap" / "server.pcap", [out / "server" / "keys.log"], gt.header["start_unix_ns"]), gt)
    assert j.dropped == [] and not any(r.fate == "dropped" for r in gt.records)
    held = [p for p in j.packets if "held" in p.marks]
    assert len(held) == 1 and held[0].fidx == 60 and held[0].reorder_distance == k
    declared = declared_losses(next((out / "server" / "qlog").glob("*")))
    audit = J.audit_losses(j, declared)
    # Nothing was dropped, so every declared loss is spurious, and the join names them all.
    assert audit.real_declarations == [] and audit.undeclared_drops == [] and audit.unknown_declarations == []
    assert sorted(s.pn for s in audit.spurious_declarations) == sorted(d.pn for d in declared)
    # Only the held packet can have been declared lost (beyond the packet threshold, and
    # only when an ACK of later packets left the client before it arrived: timing).
    assert {s.pn for s in audit.spurious_declarations} <= {held[0].pn}
    assert {r.original_pn for r in audit.spurious_retransmissions} <= {held[0].pn}
    if k < 3:
        assert declared == []
    # Nothing was dropped: a window reduction, if any, can only be blamed on the reorder.
    trace = max(read_run(out, stack)["server"], key=lambda t: len(t.of(ev.PacketSent)))
    causes = R.reductions_with_cause(trace, gt, j)
    assert all(c.cause == "spurious" and c.matched_by == "pn" for c in causes), [c.describe() for c in causes]
    assert declared or not causes
