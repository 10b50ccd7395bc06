"""quinn in virtual time (docs/virtual-time.md): the Rust harness quinn-virtual
(harness/endpoints/rust/quinn-virtual) over the emulator's own core. A transfer
completes and reads like a real-time run; drops keyed by index are declared lost,
and nothing else is; reruns are byte-identical; bad input is named."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness import endpoints
from harness.schedule import Action, LinkSettings, Schedule
from harness.testbed.topology import EndpointOptions, TransferPlan
from harness.virtual import rust, transfer, transfer_with_stats
from virtual_runs import lossy

pytestmark = pytest.mark.skipif(not rust.built("quinn"),
                                reason=f"{rust.BINARIES['quinn']} not built: run `make setup`")


def test_transfer_completes_and_reads_like_a_real_time_run(tmp_path):
    quinn = endpoints.load("quinn")
    result, stats = transfer_with_stats(lossy(5), tmp_path, quinn, TransferPlan(sizes=(300_000, 100_000)),
                                        EndpointOptions(cc="newreno"))
    assert result.ok, result.reason
    assert result.bytes == 400_000 and result.unsupported is False
    assert stats["link"]["s2c"]["dropped"]["loss_iid"] > 0 and stats["virtual_s"] > 0
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["mode"] == "virtual" and saved["out_dir"] == "."
    assert [p.name for p in (tmp_path / "server" / "qlog").iterdir()][0].startswith("server-")

    from harness.observe.groundtruth import read_log
    from harness.observe.qlog import read_run
    from harness.observe.wire import read_wire

    traces = read_run(tmp_path, "quinn")
    server = traces["server"]
    assert len(server) == 1 and "clock: monotonic+applog" in server[0].notes
    gt = read_log(tmp_path / "link.ndjson")
    view = read_wire(tmp_path / "pcap" / "server.pcap", [tmp_path / "server" / "keys.log"],
                     gt.header["start_unix_ns"])
    view.check()
    assert len(view.connections) == 1
    version = json.loads((tmp_path / "server" / "app.ndjson").read_text().splitlines()[0])
    assert (version["stack"], version["cc"], version["driver"]) == ("quinn", "newreno", "longlook-virtual")


def test_index_drops_are_declared_lost_and_nothing_else_is(tmp_path):
    """On a clean link, the server declares lost exactly the packets whose
    datagrams the link dropped by index (by packet threshold: they are single
    gaps in a steady flight), and no delivered packet."""
    from harness.observe import events as ev
    from harness.observe.join import audit_losses, join_run
    from harness.observe.qlog import read_run

    drops = tuple(Action(dir="s2c", index=i, action="drop") for i in (30, 60, 61, 120))
    schedule = Schedule.constant(3, LinkSettings(rate_bps=20_000_000, delay_us=10_000, queue_bytes=200_000),
                                 actions=drops)
    result = transfer(schedule, tmp_path, endpoints.load("quinn"), TransferPlan(sizes=(600_000,)),
                      EndpointOptions(cc="cubic"))
    assert result.ok, result.reason
    j = join_run(tmp_path, "server")
    dropped = sorted(p.idx for p in j.packets if p.fate == "dropped")
    assert dropped == [30, 60, 61, 120]
    (trace,) = read_run(tmp_path, "quinn")["server"]
    audit = audit_losses(j, trace.of(ev.PacketLost))
    assert audit.spurious_declarations == [] and audit.unknown_declarations == []
    assert audit.undeclared_drops == []
    assert sorted(p.idx for p in audit.real_declarations) == [30, 60, 61, 120]


def test_a_ce_mark_by_the_link_reaches_quinn(tmp_path):
    """quinn sends ECT(0) and the harness carries the IP header's ECN bits both ways,
    as quinn-udp does in real time: one CE-marked datagram halves NewReno's window
    with no loss."""
    from harness.observe import events as ev
    from harness.observe.qlog import read_run

    schedule = Schedule.constant(3, LinkSettings(rate_bps=20_000_000, delay_us=10_000, queue_bytes=200_000),
                                 actions=(Action(dir="s2c", index=40, action="ce"),))
    assert transfer(schedule, tmp_path, endpoints.load("quinn"), TransferPlan(sizes=(600_000,)),
                    EndpointOptions(cc="newreno")).ok
    (trace,) = read_run(tmp_path, "quinn")["server"]
    assert trace.of(ev.PacketLost) == []
    cwnd = [m.congestion_window for m in trace.of(ev.Metrics) if m.congestion_window]
    cuts = [(a, b) for a, b in zip(cwnd, cwnd[1:]) if b < a]
    assert len(cuts) == 1 and cuts[0][1] == pytest.approx(cuts[0][0] / 2, rel=0.05), cuts


def test_binary_names_bad_input_and_the_fix(tmp_path):
    def run(stdin: str, run_dir: Path = tmp_path):
        return subprocess.run([str(rust.BINARIES['quinn']), str(run_dir)], input=stdin, capture_output=True,
                              text=True, check=False)

    missing = run("{}")
    assert missing.returncode == 2 and "schedule.json is missing" in missing.stderr
    assert "harness/virtual" in missing.stderr
    # A prepared directory, then a config with a bad field.
    transfer(lossy(1), tmp_path, endpoints.load("quinn"), TransferPlan(sizes=(1000,)), EndpointOptions())
    not_json = run("seed=1")
    assert not_json.returncode == 2 and "not JSON" in not_json.stderr
    no_seed = run(json.dumps({"names": ["object-0-1000.bin"], "epoch_unix_ns": 0}))
    assert no_seed.returncode == 2 and '"seed" is missing' in no_seed.stderr
    bad_name = run(json.dumps({"names": ["../etc/passwd"], "seed": 1, "epoch_unix_ns": 0}))
    assert bad_name.returncode == 2 and "not a plain file name" in bad_name.stderr
    bad_qlog = run(json.dumps({"names": ["object-0-1000.bin"], "seed": 1, "epoch_unix_ns": 0, "qlog": "no"}))
    assert bad_qlog.returncode == 2 and '"qlog" is "no"; give true or false' in bad_qlog.stderr
