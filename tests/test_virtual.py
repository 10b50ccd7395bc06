"""Virtual time (docs/virtual-time.md): the emulator core's Python bindings, the
event loop's guards against float-time livelocks, and aioquic runs that are
bit-identical across reruns and readable by harness/observe unchanged."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

longlook_link = pytest.importorskip("longlook_link", reason="bindings not built: run `make setup`")

from harness import endpoints  # noqa: E402
from harness.schedule import Action, LinkSettings, Schedule  # noqa: E402
from harness.testbed.topology import EndpointOptions, TransferPlan  # noqa: E402
from harness.virtual import RealTimeOnly, transfer, transfer_with_stats  # noqa: E402
from harness.virtual.loop import STUCK_LIMIT, EventLoop, Host, VirtualTimeError  # noqa: E402
from virtual_runs import files, lossy  # noqa: E402

C, S = ("198.18.0.1", 40000), ("198.19.0.1", 4433)


def _link(tmp_path: Path, schedule: Schedule, **kw):
    return longlook_link.Link(str(schedule.write(tmp_path / "schedule.json")), str(tmp_path / "link.ndjson"), **kw)


def test_udp4_checksums_are_what_a_kernel_accepts():
    from scapy.layers.inet import IP, UDP

    pkt = longlook_link.udp4(C[0], S[0], C[1], S[1], b"hello, link")
    parsed = IP(pkt)
    ip_sum, udp_sum = parsed.chksum, parsed[UDP].chksum
    del parsed.chksum, parsed[UDP].chksum
    rebuilt = IP(bytes(parsed))
    assert (ip_sum, udp_sum) == (rebuilt.chksum, rebuilt[UDP].chksum)
    assert bytes(parsed[UDP].payload) == b"hello, link"


def test_bindings_apply_the_cores_index_drop_and_delay(tmp_path):
    schedule = Schedule.constant(3, LinkSettings(delay_us=10_000), actions=(Action(dir="c2s", index=1, action="drop"),))
    link = _link(tmp_path, schedule)
    for i in range(3):
        link.on_packet(i * 1000, "c2s", longlook_link.udp4(C[0], S[0], C[1], S[1], bytes([i]) * 100))
    assert link.next_deadline() == 10_000_000
    out = []
    while (tx := link.poll_transmit(10**9)) is not None:
        out.append((tx[0], tx[1][-1], tx[2]))
    assert out == [("c2s", 0, 10_000_000), ("c2s", 2, 10_002_000)]
    link.close()
    lines = [json.loads(x) for x in (tmp_path / "link.ndjson").read_text().splitlines()]
    assert lines[0]["seed"] == 3 and "summary" in lines[-1]
    assert [(r["idx"], r["fate"], r["reason"]) for r in lines[1:-1]] == [
        (1, "dropped", "loss_index"), (0, "delivered", None), (2, "delivered", None)]


def test_batched_send_and_poll_are_the_per_packet_calls(tmp_path):
    # The loop's one-call-per-instant bindings must leave the same trail (log,
    # captures) and hand over the same UDP payloads as on_packet(udp4(...)) and
    # poll_transmit, including the index drop.
    schedule = Schedule.constant(3, LinkSettings(delay_us=10_000), actions=(Action(dir="c2s", index=1, action="drop"),))
    payloads = [bytes([i]) * (100 + i) for i in range(3)] + [b""]
    trails, delivered = [], []
    for way in ("per-packet", "batched"):
        d = tmp_path / way
        (d / "pcap").mkdir(parents=True)
        link = longlook_link.Link(str(schedule.write(d / "schedule.json")), str(d / "link.ndjson"), str(d / "pcap"))
        if way == "per-packet":
            for p in payloads:
                link.on_packet(5000, "c2s", longlook_link.udp4(C[0], S[0], C[1], S[1], p))
            out = []
            while (tx := link.poll_transmit(10**9)) is not None:
                out.append((tx[0], tx[1][28:], tx[3]))
        else:
            link.send(5000, "c2s", C, S, payloads)
            out = link.poll_due(10**9)
        link.close()
        delivered.append(out)
        trails.append({p.name: p.read_bytes() for p in (d / "pcap").iterdir()} | {"log": (d / "link.ndjson").read_bytes()})
    assert delivered[0] == delivered[1] == [("c2s", payloads[0], 0), ("c2s", payloads[2], 0), ("c2s", b"", 0)]
    assert trails[0] == trails[1]


def test_bindings_reject_misuse_with_the_fix(tmp_path):
    link = _link(tmp_path, Schedule.constant(1, LinkSettings()))
    with pytest.raises(ValueError, match='give "c2s" or "s2c"'):
        link.on_packet(0, "up", b"")
    with pytest.raises(ValueError, match='address "198.18.0": '):
        link.send(0, "c2s", ("198.18.0", C[1]), S, [b"x"])
    with pytest.raises(ValueError, match="does not fit one IPv4 packet"):
        link.send(0, "c2s", C, S, [bytes(65_508)])
    with pytest.raises(TypeError):
        link.send(0, "c2s", C, S, [b"first", "not bytes"])
    assert json.loads(link.stats())["c2s"]["arrived"] == 0  # a bad item sends none of them
    assert link.close() == link.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        link.on_packet(0, "c2s", b"")
    (tmp_path / "bad.json").write_text('{"seed": 1, "phases": []}')
    with pytest.raises(ValueError, match="phases"):
        longlook_link.Link(str(tmp_path / "bad.json"))


class FakeHost(Host):
    """A stack with one timer that it clears only when `now > T` (strictly), or never."""

    def __init__(self, name, addr, port, timer: float | None, clears: bool = True):
        super().__init__(name, addr, port)
        self.timer, self.clears, self.handled = timer, clears, 0

    def timer_s(self):
        return self.timer

    def on_timer(self, now_s, now_ns):
        self.handled += 1
        if self.clears and now_s > self.timer:
            self.timer = None

    def receive(self, payload, peer, now_s, now_ns):
        pass

    def flush(self, now_s, now_ns):
        return []

    def finished(self):
        return self.timer is None


def test_a_timer_still_due_after_handling_advances_time_instead_of_spinning(tmp_path):
    # The stack wants time strictly past T, so firing at T itself does not clear it:
    # the loop must move to the next ns rather than fire at the same instant forever.
    client = FakeHost("client", *C, timer=0.25)
    loop = EventLoop(_link(tmp_path, Schedule.constant(1, LinkSettings())), client, FakeHost("server", *S, None))
    assert loop.run(10**9)
    assert loop.now_ns == 250_000_001 and client.handled == 2


def test_the_run_sets_older_objects_aside_from_the_collector_and_restores_it(tmp_path):
    import gc

    class Recording(FakeHost):
        def on_timer(self, now_s, now_ns):
            self.frozen = gc.get_freeze_count()
            super().on_timer(now_s, now_ns)

    for d in "abc":
        (tmp_path / d).mkdir()
    assert gc.get_freeze_count() == 0
    client = Recording("client", *C, timer=0.25)
    assert EventLoop(_link(tmp_path / "a", Schedule.constant(1, LinkSettings())), client, FakeHost("server", *S, None)).run(10**9)
    assert client.frozen > 0 and gc.get_freeze_count() == 0
    # A caller's own freeze outlives the run, and a failed run thaws too.
    gc.freeze()
    try:
        held = gc.get_freeze_count()
        stuck = FakeHost("client", *C, timer=0.5, clears=False)
        with pytest.raises(VirtualTimeError):
            EventLoop(_link(tmp_path / "b", Schedule.constant(1, LinkSettings())), stuck, FakeHost("server", *S, None)).run(10**9)
        assert gc.get_freeze_count() >= held
    finally:
        gc.unfreeze()
    stuck = FakeHost("client", *C, timer=0.5, clears=False)
    with pytest.raises(VirtualTimeError):
        EventLoop(_link(tmp_path / "c", Schedule.constant(1, LinkSettings())), stuck, FakeHost("server", *S, None)).run(10**9)
    assert gc.get_freeze_count() == 0


def test_a_timer_the_stack_never_clears_raises_instead_of_livelocking(tmp_path):
    client = FakeHost("client", *C, timer=0.5, clears=False)
    loop = EventLoop(_link(tmp_path, Schedule.constant(1, LinkSettings())), client, FakeHost("server", *S, None))
    started = time.monotonic()
    with pytest.raises(VirtualTimeError, match=r"client: timer 0\.5 s still due"):
        loop.run(10**9)
    assert client.handled == STUCK_LIMIT and time.monotonic() - started < 5


def test_virtual_aioquic_reruns_are_bit_identical_and_observable(tmp_path):
    aioquic = endpoints.load("aioquic")
    plan, opts = TransferPlan(sizes=(150_000, 50_000)), EndpointOptions(cc="cubic")
    a, stats = transfer_with_stats(lossy(5), tmp_path / "a", aioquic, plan, opts)
    b = transfer(lossy(5), tmp_path / "b", aioquic, plan, opts)
    c = transfer(lossy(6), tmp_path / "c", aioquic, plan, opts)
    assert a.ok and b.ok and c.ok, (a.reason, b.reason, c.reason)
    assert a.bytes == 200_000 and stats["link"]["s2c"]["dropped"]["loss_iid"] > 0
    assert files(tmp_path / "a") == files(tmp_path / "b")
    # The seed reaches both the link and the stack's entropy: another seed, other bytes.
    assert files(tmp_path / "a")["link.ndjson"] != files(tmp_path / "c")["link.ndjson"]
    assert files(tmp_path / "a")["server/keys.log"] != files(tmp_path / "c")["server/keys.log"]

    from harness.observe.qlog import read_run
    from harness.observe.wire import read_wire
    from harness.observe.groundtruth import read_log

    traces = read_run(tmp_path / "a", "aioquic")
    assert traces["server"] and all("clock: epoch" in t.notes[0] for t in traces["server"])
    gt = read_log(tmp_path / "a" / "link.ndjson")
    view = read_wire(tmp_path / "a" / "pcap" / "server.pcap", [tmp_path / "a" / "server" / "keys.log"],
                     gt.header["start_unix_ns"])
    view.check()
    assert len(view.connections) == 1


def test_kernel_tcp_and_separate_process_stacks_are_real_time_only(tmp_path):
    aioquic = endpoints.load("aioquic")
    with pytest.raises(RealTimeOnly, match="kernel TCP"):
        transfer(lossy(1), tmp_path, aioquic, TransferPlan(tcp_flows=1), EndpointOptions())
    with pytest.raises(RealTimeOnly, match="quic-go is real time only: its endpoint is a separate process"):
        transfer(lossy(1), tmp_path, endpoints.load("quic-go"), TransferPlan(), EndpointOptions())


def test_real_time_recheck_reads_the_replays_closing_line():
    from harness.virtual.recheck import replay_verdict

    assert replay_verdict("....\n1 failed in 12.00s").startswith("REPRODUCED")
    assert replay_verdict("1 passed in 3.20s").startswith("did not reproduce")
    assert replay_verdict("1 skipped in 1.0s").startswith("not decided")
    assert replay_verdict("ERROR: usage").startswith("not decided")


def test_qlog_sink_writes_the_document_aioquics_own_logger_would(tmp_path, monkeypatch):
    # The reference is aioquic's QuicLogger as it is (dicts kept to the end, the
    # clock read through the patched `time`), dumped with json at the end, as the
    # virtual backend wrote qlog before the sink: same parsed document, same
    # values, only the JSON text differs (separators, exponents).
    from aioquic.quic.logger import QLOG_VERSION, QuicLogger

    from harness.virtual import qlog_sink

    class Reference(qlog_sink.VirtualQlog):
        def start_trace(self, is_client, odcid):
            return QuicLogger.start_trace(self, is_client, odcid)

        def settle(self, min_events=1):
            pass

        def write(self, qlog_dir):
            for trace in self._traces:
                data = trace.to_dict()
                doc = {"qlog_format": "JSON", "qlog_version": QLOG_VERSION, "traces": [data]}
                (qlog_dir / (data["common_fields"]["ODCID"] + ".qlog")).write_text(json.dumps(doc))

    aioquic = endpoints.load("aioquic")
    plan, opts = TransferPlan(sizes=(150_000, 50_000)), EndpointOptions(cc="cubic")
    assert transfer(lossy(5), tmp_path / "sink", aioquic, plan, opts).ok
    monkeypatch.setattr(qlog_sink, "VirtualQlog", Reference)
    assert transfer(lossy(5), tmp_path / "ref", aioquic, plan, opts).ok
    sink, ref = files(tmp_path / "sink"), files(tmp_path / "ref")
    qlogs = [k for k in sink if k.endswith(".qlog")]
    assert len(qlogs) == 2 and sink.keys() == ref.keys()
    assert {k: v for k, v in sink.items() if k not in qlogs} == {k: v for k, v in ref.items() if k not in qlogs}
    for name in qlogs:
        ours, theirs = (tmp_path / "sink" / name).read_bytes(), (tmp_path / "ref" / name).read_text()
        doc = json.loads(ours)
        # packet_received frames are filled in after the event is logged: settled too early, they would be missing.
        assert any(e["name"] == "transport:packet_received" and e["data"]["frames"] for e in doc["traces"][0]["events"])
        assert json.dumps(doc) == theirs


def test_qlog_sink_keeps_changes_made_before_settling():
    from harness.virtual.loop import Clock
    from harness.virtual.qlog_sink import VirtualQlog

    clock = Clock()
    clock.ns = 1_000_000
    logger = VirtualQlog(clock, 0)
    trace = logger.start_trace(is_client=True, odcid=b"\x01\x02")
    frames = []
    trace.log_event(category="transport", event="packet_received", data={"frames": frames})
    logger.settle(2)  # fewer events held than the batch: nothing is encoded yet
    frames.append({"frame_type": "ping"})
    logger.settle()
    frames.append({"frame_type": "padding"})  # after the settle: not the logged event any more
    trace.log_event(category="recovery", event="metrics_updated", data={"cwnd": 12_000})
    doc = json.loads(trace.document())
    assert doc["qlog_version"] and doc["traces"][0]["common_fields"] == {"ODCID": "0102"}
    assert [(e["name"], e["data"], e["time"]) for e in doc["traces"][0]["events"]] == [
        ("transport:packet_received", {"frames": [{"frame_type": "ping"}]}, 1.0),
        ("recovery:metrics_updated", {"cwnd": 12_000}, 1.0)]
    assert trace.to_dict()["events"] == doc["traces"][0]["events"]
