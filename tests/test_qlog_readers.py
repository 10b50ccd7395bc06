"""qlog readers and dialects on real captured traces (tests/fixtures/qlog), plus broken input.

Fixtures are `longlook transfer` runs (20 Mbit/s, 40 ms RTT, 2% loss each way)
cut to their qlog files, app-log version records and a link-log excerpt; see
tests/fixtures/qlog/README.md. No namespaces or root needed.
"""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.observe import events as ev
from harness.observe import qlog

FIXTURES = Path(__file__).parent / "fixtures" / "qlog"
RUNS = [("aioquic", "newreno"), ("aioquic", "cubic"), ("picoquic", "newreno"), ("quic-go", "newreno"),
        ("quiche", "cubic"), ("quinn", "cubic"), ("tquic", "cubic"), ("s2n-quic", "cubic")]
#: After the last datagram the link saw, a stack still logs while it drains (3×PTO).
DRAIN_US = 500_000
ALL_FILES = sorted(FIXTURES.glob("*/*/*/qlog/*"))


def run_dir(stack: str, cc: str) -> Path:
    return FIXTURES / stack / cc


def link_end_us(run: Path) -> float:
    recs = [json.loads(line) for line in (run / "link.ndjson").read_text().splitlines()[1:]]
    return max(max(r.get("arr_us") or 0, r.get("dep_us") or 0) for r in recs if "dir" in r)


@pytest.fixture(scope="module", params=RUNS, ids=[f"{s}-{c}" for s, c in RUNS])
def run(request):
    stack, cc = request.param
    return stack, cc, qlog.read_run(run_dir(stack, cc), stack)


# ------------------------------------------------------------------ real fixtures


def test_each_fixture_gives_one_complete_trace_per_vantage(run):
    stack, _, traces = run
    assert set(traces) == {"client", "server"}
    for vantage, ts in traces.items():
        assert len(ts) == 1, ts
        t = ts[0]
        assert (t.stack, t.vantage, t.partial) == (stack, vantage, False), t.notes
        assert any(n.startswith("clock: ") and "UNALIGNED" not in n for n in t.notes), t.notes


def test_core_events_present(run):
    stack, _, traces = run
    for t in (ts[0] for ts in traces.values()):
        assert t.of(ev.PacketSent), t.notes
        assert any(m.congestion_window for m in t.of(ev.Metrics)), t.notes
        if stack == "quinn":  # no frames in quinn's qlog: nothing to derive acks from
            assert not t.of(ev.PacketAcked) and any("no packet_acked" in n for n in t.notes)
        else:
            assert t.of(ev.PacketAcked), t.notes


def test_times_within_the_run(run):
    stack, cc, traces = run
    end = link_end_us(run_dir(stack, cc)) + DRAIN_US
    for t in (ts[0] for ts in traces.values()):
        times = [e.t_us for e in t.events]
        assert times == sorted(times)
        assert 0 <= times[0] and times[-1] <= end, (times[0], times[-1], end)


def test_rtts_are_microseconds(run):
    """Every stack's RTT on a 40 ms link reads as ~40 000 µs (quinn's seconds converted)."""
    _, _, traces = run
    for t in (ts[0] for ts in traces.values()):
        rtts = [m.latest_rtt_us for m in t.of(ev.Metrics) if m.latest_rtt_us is not None]
        assert rtts, t.notes
        assert 38_000 < statistics.median(rtts) < 120_000, statistics.median(rtts)


def test_sent_acked_lost_are_consistent(run):
    _, _, traces = run
    for t in (ts[0] for ts in traces.values()):
        sent = {(e.space, e.pn) for e in t.of(ev.PacketSent)}
        acked = [(e.space, e.pn) for e in t.of(ev.PacketAcked)]
        assert len(acked) == len(set(acked)) and set(acked) <= sent
        assert all(e.space in ev.SPACES for e in t.events if hasattr(e, "space"))
        for lost in t.of(ev.PacketLost):
            assert (lost.space, lost.pn) in sent and lost.trigger in (None, *ev.TRIGGERS)


def test_events_round_trip_through_json(run):
    _, _, traces = run
    for t in (ts[0] for ts in traces.values()):
        for e in t.events:
            line = json.dumps(e.to_json())
            assert ev.from_json(json.loads(line)) == e


@pytest.mark.parametrize("stack,cc,vantages", [
    ("quic-go", "newreno", ("client", "server")), ("picoquic", "newreno", ("server",)),
    ("quiche", "cubic", ("client", "server"))])
def test_logged_congestion_states(stack, cc, vantages):
    traces = qlog.read_run(run_dir(stack, cc), stack)
    for v in vantages:
        states = traces[v][0].of(ev.CongestionState)
        assert states and all(s.state in ev.STATES and s.raw and not s.inferred for s in states)
    server = {s.state for s in traces["server"][0].of(ev.CongestionState)}
    if stack in ("quic-go", "quiche"):  # the data sender lost packets: it went through recovery
        assert {"SlowStart", "Recovery", "CongestionAvoidance"} <= server


def test_stack_specific_mapping():
    qg = qlog.read_run(run_dir("quic-go", "newreno"), "quic-go")["server"][0]
    assert {e.trigger for e in qg.of(ev.PacketLost)} <= set(ev.TRIGGERS) and qg.of(ev.PacketLost)
    quinn = qlog.read_run(run_dir("quinn", "cubic"), "quinn")["server"][0]
    assert quinn.of(ev.PacketLost) and {e.trigger for e in quinn.of(ev.PacketLost)} == {None}
    assert any("seconds" in n for n in quinn.notes)
    quiche = qlog.read_run(run_dir("quiche", "cubic"), "quiche")["server"][0]
    assert not quiche.of(ev.PacketLost) and any("cf_lost_packets counts 2" in n for n in quiche.notes)
    pico = qlog.read_run(run_dir("picoquic", "newreno"), "picoquic")["server"][0]
    assert [s.raw for s in pico.of(ev.CongestionState)] == ["1"]
    assert any(n.startswith("clock: link") for n in pico.notes)  # aiopquic's applog has no t_us/wall_us
    aio = qlog.read_run(run_dir("aioquic", "newreno"), "aioquic")["server"][0]
    assert aio.of(ev.PacketLost) and all(e.trigger is None for e in aio.of(ev.PacketLost))
    assert not aio.of(ev.CongestionState)
    # tquic logs packet_received after the losses and window its ACK caused: the
    # derived acknowledgement must still come before those effects.
    tq = qlog.read_run(run_dir("tquic", "cubic"), "tquic")["server"][0]
    assert tq.of(ev.PacketLost) and all(e.trigger is None for e in tq.of(ev.PacketLost))
    assert not tq.of(ev.CongestionState) and any(n.startswith("tquic: no congestion states") for n in tq.notes)
    first_loss = tq.of(ev.PacketLost)[0]
    assert any(a.t_us <= first_loss.t_us for a in tq.of(ev.PacketAcked)), "no ACK before the first loss"
    # s2n-quic's trace is our endpoint's, from s2n-quic's events: the packet whose ACK
    # declared a loss is written before the loss (held until its frames were reported):
    # each loss follows an acknowledgement of a later packet (RFC 9002 §6.1).
    s2n = qlog.read_run(run_dir("s2n-quic", "cubic"), "s2n-quic")["server"][0]
    losses = s2n.of(ev.PacketLost)
    assert losses and all(e.trigger is None for e in losses) and not s2n.of(ev.CongestionState)
    for loss in losses:
        later = [a for a in s2n.of(ev.PacketAcked) if a.t_us <= loss.t_us and a.space == loss.space and a.pn > loss.pn]
        assert later, f"no ACK of a later packet before the loss of {loss.pn}"


def test_ngtcp2_server_trace_is_placed_by_the_link():
    """ngtcp2 writes reference_time 0 with relative whole-ms times: no clock, so the
    trace is aligned on the server's first datagram; its losses and window are read."""
    (trace,) = qlog.read_run(run_dir("ngtcp2", "cubic"), "ngtcp2")["server"]
    assert trace.stack == "ngtcp2" and trace.notes[0].startswith("clock: link")
    assert 0 < trace.events[0].t_us < 2_000_000, trace.events[0]
    assert len(trace.of(ev.PacketLost)) == 6 and all(e.trigger is None for e in trace.of(ev.PacketLost))
    assert any(m.congestion_window for m in trace.of(ev.Metrics))
    assert trace.of(ev.PacketAcked) and not trace.of(ev.CongestionState)


def test_picoquic_states_need_the_cc():
    q = next((run_dir("picoquic", "newreno") / "server" / "qlog").glob("*"))
    t = qlog.read_trace(q, "picoquic", "server", None)
    assert not t.of(ev.CongestionState)
    assert any("not mapped" in n for n in t.notes) and any("UNALIGNED" in n or "no link start" in n for n in t.notes)


SEQ_FILES = [p for p in ALL_FILES if p.suffix == ".sqlog"]


@pytest.mark.parametrize("path", SEQ_FILES, ids=lambda p: f"{p.parents[3].name}-{p.parents[1].name}")
def test_pruned_decode_gives_the_same_trace(path, monkeypatch):
    """read_traces decodes JSON-SEQ events keeping only the keys in dialects/_fields.py;
    a key a dialect reads but _fields lacks would change the trace. Small blocks make
    the pruning decoder run on these small files (the first block, with the header,
    is always decoded whole)."""
    stack, vantage = _stack_of(path), path.parents[1].name
    monkeypatch.setattr(qlog, "SNIFF", 1024)
    monkeypatch.setattr(qlog, "CHUNK", 2048)
    calls = []
    pruned_decode = qlog._decode_pruned
    monkeypatch.setattr(qlog, "_decode_pruned", lambda b: calls.append(1) or pruned_decode(b))
    pruned = _read(path, stack, vantage)
    assert len(calls) > 5
    full_read = qlog.read_raw
    monkeypatch.setattr(qlog, "read_raw", lambda p, prune=False: full_read(p))
    full = _read(path, stack, vantage)
    assert pruned.events == full.events and pruned.notes == full.notes


# ------------------------------------------------------------------- broken input


def _read(path: Path, stack: str, vantage: str = "server") -> ev.Trace:
    run = path.parents[2]
    return qlog.read_trace(path, stack, vantage, qlog.read_link_start(run / "link.ndjson"),
                           run / vantage / "app.ndjson", run / "link.ndjson")


def _stack_of(path: Path) -> str:
    return path.parents[3].name


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: f"{p.parents[3].name}-{p.parents[1].name}")
@pytest.mark.parametrize("frac", [0.3, 0.61, 0.97])
def test_truncated_file_gives_partial_trace(path, frac, tmp_path):
    data = path.read_bytes()
    n = int(len(data) * frac)
    if data[n - 1:n] == b"\n":  # a cut right after a complete record looks like a whole file
        n -= 1
    cut = tmp_path / path.name
    cut.write_bytes(data[:n])
    vantage = path.parents[1].name
    whole = _read(path, _stack_of(path), vantage)
    t = qlog.read_trace(cut, _stack_of(path), vantage, qlog.read_link_start(path.parents[2] / "link.ndjson"),
                        path.parents[1] / "app.ndjson", path.parents[2] / "link.ndjson")
    assert t.partial
    assert any(str(cut) in n and ("line" in n or "byte" in n) for n in t.notes), t.notes
    assert 0 < len(t.events) < len(whole.events)


def test_aioquic_two_writers_in_one_file(tmp_path):
    """Two processes writing the same ODCID file: one document, then the other's tail."""
    run = run_dir("aioquic", "newreno")
    server = next((run / "server" / "qlog").glob("*")).read_bytes()
    client = next((run / "client" / "qlog").glob("*")).read_bytes()
    mixed = tmp_path / "c0ffee.qlog"
    mixed.write_bytes(client + server[len(client):])
    t = qlog.read_trace(mixed, "aioquic", "client", qlog.read_link_start(run / "link.ndjson"))
    assert t.partial and t.of(ev.PacketSent)
    assert any("extra data" in n and str(mixed) in n for n in t.notes)
    interleaved = tmp_path / "c0ffee2.qlog"
    interleaved.write_bytes(client[:30000] + server[12000:40000])
    t2 = qlog.read_trace(interleaved, "aioquic", "client", qlog.read_link_start(run / "link.ndjson"))
    assert t2.partial and t2.of(ev.PacketSent) and any("invalid JSON at line 1" in n for n in t2.notes)


def test_bad_record_in_the_middle_of_json_seq(tmp_path):
    path = next((run_dir("quic-go", "newreno") / "server" / "qlog").glob("*"))
    recs = path.read_bytes().split(b"\x1e")
    mid = len(recs) // 2
    recs[mid] = recs[mid][: len(recs[mid]) // 2] + b"\n"
    recs[mid + 3] = b"\xff\xfe garbage\n"
    broken = tmp_path / path.name
    broken.write_bytes(b"\x1e".join(recs))
    t = _read_with_run(broken, path, "quic-go")
    whole = _read(path, "quic-go")
    assert t.partial and len(t.events) < len(whole.events)
    assert max(e.t_us for e in t.events) == max(e.t_us for e in whole.events)  # kept reading after it
    note = next(n for n in t.notes if "unreadable record" in n)
    assert f"line {mid}" in note and "2 unreadable" in note


def _read_with_run(path: Path, like: Path, stack: str) -> ev.Trace:
    run = like.parents[2]
    return qlog.read_trace(path, stack, "server", qlog.read_link_start(run / "link.ndjson"),
                           run / "server" / "app.ndjson", run / "link.ndjson")


def test_unreadable_files_raise_qlog_error_naming_them(tmp_path):
    for name, data in [("empty.qlog", b""), ("binary.qlog", bytes(range(256))), ("html.qlog", b"<html>"),
                       ("header-cut.qlog", b'{"qlog_version": "0.3", "tra'), ("list.qlog", b"[1, 2, 3]")]:
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(qlog.QlogError, match=name):
            qlog.read_trace(p, "aioquic", "client", 0)
    with pytest.raises(qlog.QlogError, match="missing.qlog"):
        qlog.read_trace(tmp_path / "missing.qlog", "aioquic", "client", 0)


def test_read_run_keeps_other_files_when_one_is_garbage(tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir("quiche", "cubic"), run)
    (run / "server" / "qlog" / "zz-garbage.sqlog").write_bytes(b"\x00\x01garbage")
    traces = qlog.read_run(run, "quiche")
    good, bad = traces["server"]
    assert good.of(ev.PacketSent) and not good.partial
    assert bad.partial and not bad.events and "zz-garbage.sqlog" in bad.notes[0]


def test_huge_single_line_inputs_do_not_crash(tmp_path):
    cases = {
        "deep.qlog": b'{"traces": [{"events": [' + b"[" * 200_000,
        "longstring.sqlog": b'\x1e{"qlog_version": "0.3", "trace": {}}\n\x1e{"time": 1, "name": "x:y", "data": "'
                            + b"a" * 20_000_000,
        "longdoc.qlog": b'{"traces": [{"events": [' + b'{"time": 1, "name": "a:b", "data": {}},' * 300_000,
        "digits.qlog": b'{"a": ' + b"1" * 5_000_000,
    }
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        try:
            t = qlog.read_trace(p, "quic-go", "client", 0)
        except qlog.QlogError as e:
            assert name in str(e)
        else:
            assert t.partial, name
    t = qlog.read_trace(tmp_path / "longdoc.qlog", "quic-go", "client", 0)
    assert t.partial and len(qlog.read_raw(tmp_path / "longdoc.qlog")[0].events) == 300_000  # each one complete


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=4096), start=st.sampled_from([b"", b"{", b"\x1e", b'{"traces":[{"events":[']))
def test_random_bytes_never_crash(tmp_path, data, start):
    p = tmp_path / "fuzz.qlog"
    p.write_bytes(start + data)
    try:
        qlog.read_trace(p, "quiche", "client", 0)
    except qlog.QlogError:
        pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, len(ALL_FILES) - 1), flips=st.integers(1, 40))
def test_mutated_fixtures_never_crash(tmp_path, seed, which, flips):
    src = ALL_FILES[which]
    data = bytearray(src.read_bytes())
    rng = random.Random(seed)
    for _ in range(flips):
        data[rng.randrange(len(data))] = rng.choice(b'{}[],:"\x1e\n0a\xff')
    p = tmp_path / src.name
    p.write_bytes(bytes(data))
    try:
        t = _read_with_run(p, src, _stack_of(src))
    except qlog.QlogError as e:
        assert str(p) in str(e)
    else:
        assert isinstance(t, ev.Trace)


# Values of any JSON type, for fields the dialects expect to be numbers, strings or objects.
_ANY = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                    | st.text(max_size=8), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
_NAMES = st.sampled_from(["transport:packet_sent", "transport:packet_received", "recovery:packet_lost",
                          "recovery:metrics_updated", "recovery:congestion_state_updated",
                          "recovery:loss_timer_updated", "recovery:spurious_loss", "quic:packet_sent",
                          "quic:recovery_metrics_updated", "other:thing"])
_DATA_KEYS = st.sampled_from(["header", "frames", "raw", "packet_number", "packet_type", "trigger",
                              "congestion_window", "smoothed_rtt", "ssthresh", "pto_count", "new", "event_type",
                              "timer_type", "cf_lost_packets", "packet_number_space"])


def _odd_event(draw_value, name, data):
    return {"time": draw_value, "name": name, "data": data}


_EVENTS = st.lists(st.builds(_odd_event, st.one_of(st.integers(0, 10**6), _ANY), _NAMES,
                             st.one_of(st.dictionaries(_DATA_KEYS, _ANY, max_size=4), _ANY)),
                   min_size=1, max_size=40)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_EVENTS, seq=st.booleans())
def test_wrongly_typed_fields_never_crash_or_change_with_pruning(tmp_path, monkeypatch, events, seq):
    """Well-formed JSON whose fields have the wrong types: the dialect skips what it
    cannot use, events it builds have model types, and the pruning decoder (forced
    onto every block past the header by tiny reads) gives the same trace as the
    full decode."""
    header = {"qlog_version": "0.3", "qlog_format": "JSON-SEQ", "trace": {"vantage_point": {"type": "client"}}}
    p = tmp_path / ("odd.sqlog" if seq else "odd.qlog")
    if seq:
        p.write_bytes(b"".join(b"\x1e" + json.dumps(r).encode() + b"\n" for r in [header] + events))
    else:
        p.write_text(json.dumps({"qlog_version": "0.3", "traces": [{"events": events}]}))
    # One context per example: the fixture's monkeypatch outlives Hypothesis' examples.
    with monkeypatch.context() as mp:
        mp.setattr(qlog, "SNIFF", 64)
        mp.setattr(qlog, "CHUNK", 64)
        calls = []
        pruned_decode = qlog._decode_pruned
        mp.setattr(qlog, "_decode_pruned", lambda b: calls.append(1) or pruned_decode(b))
        try:
            pruned = qlog.read_trace(p, "quic-go", "client", None)
        except qlog.QlogError as e:
            assert str(p) in str(e)
            return
        assert calls or not seq  # the pruning path did run
        for e in pruned.events:
            assert isinstance(e.t_us, float) or type(e.t_us) is int
            assert not hasattr(e, "pn") or type(e.pn) is int
        full_read = qlog.read_raw
        mp.setattr(qlog, "read_raw", lambda path, prune=False: full_read(path))
        full = qlog.read_trace(p, "quic-go", "client", None)
    assert pruned.events == full.events
