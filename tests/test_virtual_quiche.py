"""quiche in virtual time (docs/virtual-time.md): the Rust harness quiche-virtual
(harness/endpoints/rust/quiche-virtual) runs quiche-endpoint's own client and
server over the emulator's core, with the clock and getrandom answered by the
binary. A transfer completes and reads like a real-time run, its qlog times are
virtual ones on the link's clock, reruns are byte-identical, and the seed
reaches everything, TLS included."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from harness import endpoints
from harness.testbed.topology import EndpointOptions, TransferPlan
from harness.virtual import rust, supports, transfer, transfer_with_stats
from virtual_runs import lossy

pytestmark = pytest.mark.skipif(not rust.built("quiche"),
                                reason=f"{rust.BINARIES['quiche']} not built: run `make setup`")


def test_quiche_is_supported():
    assert supports("quiche") is None


def test_transfer_completes_and_reads_like_a_real_time_run(tmp_path):
    quiche = endpoints.load("quiche")
    result, stats = transfer_with_stats(lossy(5), tmp_path, quiche, TransferPlan(sizes=(300_000, 100_000)),
                                        EndpointOptions(cc="cubic"))
    assert result.ok, result.reason
    assert result.bytes == 400_000 and result.unsupported is False
    assert stats["link"]["s2c"]["dropped"]["loss_iid"] > 0 and stats["virtual_s"] > 0
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["mode"] == "virtual" and saved["out_dir"] == "."

    from harness.observe.groundtruth import read_log
    from harness.observe import events as ev
    from harness.observe.qlog import read_run
    from harness.observe.wire import read_wire

    (server,) = read_run(tmp_path, "quiche")["server"]
    gt = read_log(tmp_path / "link.ndjson")
    # quiche's qlog origin is its (virtual) wall clock: the server's first packet
    # leaves when the client's first datagram reaches it, on the link's clock.
    first_arrival = min(p.dep_us for p in gt.records if p.dir == "c2s" and p.fate == "delivered")
    assert server.of(ev.PacketSent)[0].t_us == pytest.approx(first_arrival, abs=1)
    assert server.of(ev.PacketSent)[-1].t_us <= stats["virtual_s"] * 1e6
    view = read_wire(tmp_path / "pcap" / "server.pcap", [tmp_path / "server" / "keys.log"],
                     gt.header["start_unix_ns"])
    view.check()
    assert len(view.connections) == 1
    version = json.loads((tmp_path / "server" / "app.ndjson").read_text().splitlines()[0])
    assert (version["stack"], version["cc"], version["driver"]) == ("quiche", "cubic", "longlook-virtual")


def test_think_time_passes_in_virtual_time_only(tmp_path):
    """appidle with 2 s pauses: quiche's own timers and the client's think time
    run on the shimmed clock, so seconds of virtual time take a fraction of one."""
    started = time.monotonic()
    result, stats = transfer_with_stats(lossy(2), tmp_path, endpoints.load("quiche"),
                                        TransferPlan(sizes=(50_000, 50_000, 50_000), testcase="appidle",
                                                     think_ms=2000),
                                        EndpointOptions())
    assert result.ok, result.reason
    assert stats["virtual_s"] > 4 and time.monotonic() - started < 4


def test_binary_names_bad_input(tmp_path):
    proc = subprocess.run([str(rust.BINARIES['quiche']), str(tmp_path)], input="{}", capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2 and "schedule.json is missing" in proc.stderr
