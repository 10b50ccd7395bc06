"""Uploads (issue 20): the client's sender judged. The QUIC client runs on the link's
server side so the data still crosses it s2c, and everything downstream of the run
(ground truth, capture, the sender's trace) reads it as it reads a download."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import skip_or_fail
from harness import endpoints
from harness.observe import qlog
from harness.run import Target, mode_for
from harness.schedule import TransferPlan
from harness.testbed.contract import EndpointOptions, contract_env
from harness.virtual import RealTimeOnly
from rust_endpoints import ENDPOINTS, Pair, applog_records, check_transfer, run_pair

#: The endpoints that upload (docs/endpoints.md, LL_DIRECTION).
UPLOADERS = ("aioquic", "quinn", "tquic", "quic-go", "quiche")

CLI = [sys.executable, "-m", "harness.cli"]


def test_a_plan_names_its_direction():
    assert TransferPlan().direction == "download"
    with pytest.raises(ValueError, match="download, upload"):
        TransferPlan(direction="sideways")
    assert contract_env(EndpointOptions(), TransferPlan(direction="upload"))["LL_DIRECTION"] == "upload"
    assert "LL_DIRECTION" not in contract_env(EndpointOptions(), TransferPlan())


def test_an_upload_target_is_named_and_runs_in_real_time():
    quinn, tquic = endpoints.load("quinn"), endpoints.load("tquic")
    up = Target(quinn, quinn.resolve_cc("cubic"), direction="upload")
    assert (up.id, up.sender_id) == ("quinn-cubic-upload", "quinn-cubic")
    assert Target(quinn, quinn.resolve_cc("cubic"), tquic, "upload").id == "quinn-cubic-upload-to-tquic"
    plan = TransferPlan(direction="upload")
    assert mode_for(up, plan, "auto") == "real"
    with pytest.raises(RealTimeOnly, match="upload"):
        mode_for(up, plan, "virtual")


@pytest.mark.parametrize("args,needle", [
    (["--impl", "tquic", "--direction", "upload", "--client", "quinn"], "--client: in an upload --impl is that end"),
    (["--impl", "tquic", "--server", "quinn"], "--server: in a download --impl is that end"),
    (["--impl", "tquic", "--direction", "upload", "--mode", "virtual"], "upload runs in real time"),
])
def test_bad_upload_options_are_one_clear_line(args, needle, tmp_path):
    r = subprocess.run([*CLI, "transfer", *args, "--rate", "10mbit", "--rtt", "20ms", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("stack", ["picoquic", "tcp"])
def test_a_stack_without_uploads_refuses_them_the_contracts_way(stack, tmp_path):
    """Exit 127 with one line: the harness then reports the case unsupported, never a
    download passed off as an upload."""
    s = endpoints.load(stack)
    if not s.is_built():
        skip_or_fail(f"{stack} is not built; run `make setup`")
    env = {"ROLE": "client", "TESTCASE": "transfer", "LL_DIRECTION": "upload", "REQUESTS": "https://127.0.0.1:9/x",
           "LL_WWW": str(tmp_path), "LL_DOWNLOADS": str(tmp_path), "LL_CERTS": str(tmp_path),
           "LL_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"}
    r = subprocess.run([str(s.run)], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 127 and "LL_DIRECTION" in r.stderr, (r.returncode, r.stderr)


@pytest.mark.netns
def test_a_tquic_client_uploads_through_a_lossy_link(netns_ready, tmp_path):
    if not endpoints.load("tquic").is_built():
        skip_or_fail("tquic is not built; run `make setup`")
    out = tmp_path / "up"
    r = subprocess.run([*CLI, "transfer", "--impl", "tquic", "--direction", "upload", "--bytes", "1MB",
                        "--rate", "20mbit", "--rtt", "40ms", "--loss", "0.01", "--out", str(out)],
                       capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(upload)" in r.stdout
    result = json.loads((out / "result.json").read_text())
    assert result["ok"] and result["direction"] == "upload" and result["bytes"] == 1_000_000
    # The QUIC server listens on the link's client side; the sender's files are on the server side.
    assert result["transfer"]["listener"] == "client" and result["transfer"]["addr"] == "198.18.0.1"
    sender = [json.loads(line) for line in (out / "server" / "app.ndjson").read_text().splitlines()]
    assert [e["bytes"] for e in sender if e.get("event") == "request_start"] == [1_000_000]
    done = [e for e in sender if e.get("event") == "request_done"]
    assert len(done) == 1 and done[0]["bytes"] == 1_000_000 and done[0].get("acked", True), done
    traces = qlog.read_run(out, "tquic")
    (trace,) = traces["server"]
    assert trace.notes and len(trace.events) > 500
    assert list((out / "report").glob("tquic-client-cwnd.png"))


@pytest.mark.parametrize("client,server", [(c, s) for c in UPLOADERS for s in UPLOADERS])
def test_uploads_between_the_endpoints_that_have_them(client, server, tmp_path):
    """Each uploading endpoint against itself and the other (over 127.0.0.1): every
    object arrives whole in the server's LL_DOWNLOADS, the client logs each
    object's size at request_start and request_done, the server what it stored."""
    for name in {client, server}:
        if not endpoints.load(name).is_built():
            skip_or_fail(f"{name} is not built; run `make setup`")
    pair = Pair(tmp_path)
    for i in range(3):
        pair.add_file(f"u{i}.bin", 300_000 + 7 * i)
    run_pair(pair, ENDPOINTS / server / "run", ENDPOINTS / client / "run", testcase="multiplexing",
             common={"LL_DIRECTION": "upload", "LL_DOWNLOADS": str(pair.downloads), "LL_PYTHON": sys.executable},
             client_env={"LL_WWW": str(pair.www)})
    check_transfer(pair, require_acked=False)
    sizes = sorted(300_000 + 7 * i for i in range(3))
    client_log = applog_records(pair.client.applog)
    for event in ("request_start", "request_done"):
        assert sorted(r["bytes"] for r in client_log if r.get("event") == event) == sizes, client_log
    stored = [r["bytes"] for r in applog_records(pair.server.applog) if r.get("event") == "request_done"]
    assert sorted(stored) == sizes


@pytest.mark.netns
def test_an_uploads_capture_reads_by_the_link(netns_ready, tmp_path):
    """In an upload the QUIC client sends from the link's server side: the wire view
    (decrypted by QUIC role) names directions by the link, so the data is s2c and
    enters the link on the server side, and the join with the ground truth aligns."""
    from harness.cli import link_schedule
    from harness.observe.groundtruth import read_log
    from harness.observe.join import join_run
    from harness.observe.wire import read_wire
    from harness.testbed.topology import Testbed

    tquic = endpoints.load("tquic")
    if not tquic.is_built():
        skip_or_fail("tquic is not built; run `make setup`")
    with Testbed(link_schedule(20_000_000, 40_000, 0.03, None, 3), tmp_path) as bed:
        result = bed.transfer(tquic, TransferPlan(sizes=(400_000,), direction="upload"), EndpointOptions())
    assert result.ok, result.reason
    gt = read_log(tmp_path / "link.ndjson")
    assert gt.server_side_addrs() == {"198.19.0.1"}
    view = read_wire(tmp_path / "pcap" / "server.pcap", [tmp_path / "server" / "keys.log"], gt.header["start_unix_ns"],
                     server_addrs={result.transfer.addr}, server_side_addrs=gt.server_side_addrs())
    view.check()
    sent = [d for d in view.datagrams if d.src[0] == "198.19.0.1"]  # the uploading QUIC client's
    assert len(sent) > 300 and all(d.direction == "s2c" and d.entered for d in sent)
    assert all(d.direction == "c2s" and not d.entered for d in view.datagrams if d.src[0] == "198.18.0.1")
    data = sum(f.length for d in sent for p in d.packets for f in p.frames if f.name == "stream")
    assert data >= 400_000
    j = join_run(tmp_path, "server", gt)
    assert j.direction == "s2c" and len(j.packets) >= len(sent)
    assert all(p.fate in ("delivered", "dropped") for p in j.packets)
    assert any(p.fate == "dropped" for p in j.packets)  # 3% loss, 300+ datagrams


def test_only_a_torn_last_qlog_record_is_dropped(tmp_path):
    """An endpoint's qlog may end half-way through a record written while it exited
    (seen once in CI, quinn uploading to tquic): the helpers drop that tail alone."""
    from rust_endpoints import qlog_events

    f = tmp_path / "q.sqlog"
    f.write_text('\x1e{"name":"a"}\n\x1e{"name":"b"}\n\x1e{"time":9.2,"name":"quic:packet_rec')
    assert [e["name"] for e in qlog_events(f)] == ["a", "b"]
    f.write_text('\x1e{"name":"a"}\n\x1e{"time":9.2,"na\n\x1e{"name":"b"}\n')
    with pytest.raises(json.JSONDecodeError):
        qlog_events(f)
