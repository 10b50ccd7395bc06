"""The quic-go endpoint (harness/endpoints/quic-go) against docs/endpoints.md.

Runs the built server and client over 127.0.0.1 (no namespaces, no emulator):
a 2 MB transfer with every output file checked, the other test cases, the
options it must refuse with exit 127, and interop with the aioquic endpoint in
both directions, which is what proves the contract is shared. Builds nothing:
skips when `harness/endpoints/quic-go/build.sh` has not been run.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.testbed.certs import write_certs

ROOT = Path(__file__).resolve().parents[1]
QUICGO = ROOT / "harness" / "endpoints" / "quic-go"
QUICGO_RUN = QUICGO / "run"
AIOQUIC_RUN = ROOT / "harness" / "endpoints" / "aioquic" / "run"
CAPS = json.loads((QUICGO / "caps.json").read_text())

pytestmark = pytest.mark.skipif(
    not (QUICGO / "bin" / "endpoint").exists(),
    reason="quic-go endpoint not built: run harness/endpoints/quic-go/build.sh",
)

FILE_SIZE = 2_000_000
TIMEOUT_S = 60


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Side:
    """The directories and environment of one endpoint process."""

    def __init__(self, base: Path, role: str, **extra: str):
        self.dir = base / role
        self.qlogdir = self.dir / "qlog"
        self.keylog = self.dir / "keys.log"
        self.applog = self.dir / "app.ndjson"
        self.qlogdir.mkdir(parents=True)
        self.env = {
            **os.environ,
            "ROLE": role,
            "TESTCASE": "transfer",
            "QLOGDIR": str(self.qlogdir),
            "SSLKEYLOGFILE": str(self.keylog),
            "LL_APPLOG": str(self.applog),
            "LL_TIMEOUT_S": str(TIMEOUT_S),
            # The aioquic endpoint runs under this interpreter, which has its pin.
            "LL_PYTHON": sys.executable,
            **extra,
        }


@pytest.fixture
def bench(tmp_path):
    """Certificates, a served directory with a 2 MB random file, a free port."""
    certs = tmp_path / "certs"
    write_certs(certs)
    www = tmp_path / "www"
    www.mkdir()
    (www / "big").write_bytes(os.urandom(FILE_SIZE))
    (www / "small").write_bytes(os.urandom(10_000))
    return {"base": tmp_path, "certs": certs, "www": www, "port": free_udp_port()}


def start_server(run: Path, bench: dict, **extra: str) -> tuple[subprocess.Popen, Side]:
    side = Side(bench["base"], "server", LL_ADDR="127.0.0.1", LL_PORT=str(bench["port"]),
                LL_WWW=str(bench["www"]), LL_CERTS=str(bench["certs"]), **extra)
    proc = subprocess.Popen([str(run)], env=side.env, stdout=subprocess.PIPE,
                            stderr=open(side.dir / "stderr", "wb"))
    ready, _, _ = select.select([proc.stdout], [], [], 15)
    line = proc.stdout.readline() if ready else b""
    if json.loads(line or b"{}").get("ready") is not True:
        proc.kill()
        pytest.fail(f"{run} server never printed ready: {(side.dir / 'stderr').read_text()}")
    return proc, side


def stop_server(proc: subprocess.Popen, side: Side) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"server ignored SIGTERM: {(side.dir / 'stderr').read_text()}")


def run_client(run: Path, bench: dict, names: list[str], **extra: str):
    side = Side(bench["base"], "client", **extra)
    downloads = side.dir / "downloads"
    downloads.mkdir()
    side.env["LL_DOWNLOADS"] = str(downloads)
    side.env["REQUESTS"] = " ".join(f"https://127.0.0.1:{bench['port']}/{n}" for n in names)
    proc = subprocess.run([str(run)], env=side.env, capture_output=True, timeout=TIMEOUT_S + 10)
    assert proc.returncode == 0, f"client exit {proc.returncode}: {proc.stderr.decode()}"
    return side, downloads


def transfer(client_run: Path, server_run: Path, bench: dict, names: list[str], **extra: str):
    """Runs one client against one server; returns both sides after checking the bytes."""
    server, server_side = start_server(server_run, bench)
    try:
        client_side, downloads = run_client(client_run, bench, names, **extra)
    finally:
        server_rc = stop_server(server, server_side)
    assert server_rc == 0, (server_side.dir / "stderr").read_text()
    for name in names:
        assert sha256(downloads / name) == sha256(bench["www"] / name), name
    return client_side, server_side


def qlog_events(qlogdir: Path) -> list[dict]:
    """Every event of the one JSON-SEQ qlog file quic-go wrote for the connection."""
    files = list(qlogdir.glob("*.sqlog"))
    assert len(files) == 1, f"expected one qlog file per connection, got {files}"
    records = [r for r in files[0].read_text().split("\x1e") if r.strip()]
    return [json.loads(r) for r in records[1:]]  # the first record is the header


def assert_quicgo_outputs(side: Side) -> None:
    """A quic-go side's qlog has cwnd metrics, its key log 1-RTT secrets, its applog a version line."""
    events = qlog_events(side.qlogdir)
    cwnd = [e for e in events if e["name"] == "recovery:metrics_updated" and "congestion_window" in e["data"]]
    assert cwnd, "no recovery:metrics_updated event with congestion_window"
    assert any(e["name"] == "recovery:congestion_state_updated" for e in events)

    keys = side.keylog.read_text()
    assert "CLIENT_TRAFFIC_SECRET_0 " in keys and "SERVER_TRAFFIC_SECRET_0 " in keys

    lines = side.applog.read_text().splitlines()
    version = json.loads(lines[0])
    assert version["event"] == "version"
    assert (version["stack"], version["version"], version["cc"]) == ("quic-go", CAPS["version"], "newreno")
    for line in lines[1:]:
        assert {"t_us", "event", "stream", "bytes"} <= json.loads(line).keys()


def test_transfer_2mb(bench):
    client, server = transfer(QUICGO_RUN, QUICGO_RUN, bench, ["big"])
    assert_quicgo_outputs(client)
    assert_quicgo_outputs(server)
    server_events = [json.loads(line)["event"] for line in server.applog.read_text().splitlines()[1:]]
    assert server_events == ["request_start", "request_done"]
    done = json.loads(server.applog.read_text().splitlines()[-1])
    assert done["bytes"] == FILE_SIZE


def test_multiplexing(bench):
    client, _ = transfer(QUICGO_RUN, QUICGO_RUN, bench, ["big", "small"], TESTCASE="multiplexing")
    streams = {json.loads(line)["stream"] for line in client.applog.read_text().splitlines()[1:]}
    assert len(streams) == 2


def test_appidle_logs_think_time(bench):
    client, _ = transfer(QUICGO_RUN, QUICGO_RUN, bench, ["small", "small"],
                         TESTCASE="appidle", LL_THINK_MS="200")
    events = [json.loads(line) for line in client.applog.read_text().splitlines()[1:]]
    names = [e["event"] for e in events]
    assert names == ["request_start", "request_done", "idle_start", "idle_end",
                     "request_start", "request_done"]
    idle_us = events[3]["t_us"] - events[2]["t_us"]
    assert 200_000 <= idle_us < 1_000_000


@pytest.mark.parametrize("env", [
    {"LL_CC": "cubic"},
    {"LL_CC": "bbr"},
    {"LL_CC": "mymodule:Factory"},
    {"LL_INITIAL_WINDOW": "10"},
    {"LL_MAX_DATAGRAM_SIZE": "1500"},
    {"TESTCASE": "handshake"},
], ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()))
def test_unsupported_option_exits_127(tmp_path, env):
    side = Side(tmp_path, "client", REQUESTS="https://127.0.0.1:9/x",
                LL_DOWNLOADS=str(tmp_path), **env)
    start = time.monotonic()
    proc = subprocess.run([str(QUICGO_RUN)], env=side.env, capture_output=True, timeout=10)
    assert proc.returncode == 127
    assert time.monotonic() - start < 5
    assert len(proc.stderr.decode().strip().splitlines()) == 1, proc.stderr


def test_fixed_initial_window_and_datagram_size_are_honoured(bench):
    """The data sender's full packets are exactly LL_MAX_DATAGRAM_SIZE (1400, above the
    1252 B default, so a size left at its default fails), and its window starts at
    quic-go's fixed 32 of them; any other LL_INITIAL_WINDOW is refused (127)."""
    size = 1400
    server, server_side = start_server(QUICGO_RUN, bench, LL_INITIAL_WINDOW="32", LL_MAX_DATAGRAM_SIZE=str(size))
    try:
        run_client(QUICGO_RUN, bench, ["big"], LL_MAX_DATAGRAM_SIZE=str(size))
    finally:
        stop_server(server, server_side)
    events = qlog_events(server_side.qlogdir)
    sent = [e["data"]["raw"]["length"] for e in events if e["name"] == "transport:packet_sent"]
    assert max(sent) == size, f"largest packet {max(sent)} B, LL_MAX_DATAGRAM_SIZE={size}"
    windows = [e["data"]["congestion_window"] for e in events
               if e["name"] == "recovery:metrics_updated" and "congestion_window" in e["data"]]
    assert windows and windows[0] == 32 * size, f"first window {windows[:1]}, expected 32 × {size}"
    refused = Side(bench["base"] / "refused", "server", LL_INITIAL_WINDOW="33", LL_ADDR="127.0.0.1",
                   LL_PORT=str(bench["port"]), LL_WWW=str(bench["www"]), LL_CERTS=str(bench["certs"]))
    assert subprocess.run([str(QUICGO_RUN)], env=refused.env, capture_output=True, timeout=10).returncode == 127


def aioquic_available() -> str | None:
    if not AIOQUIC_RUN.exists():
        return "harness/endpoints/aioquic/run does not exist yet"
    probe = subprocess.run([sys.executable, "-c", "import aioquic"], capture_output=True)
    if probe.returncode != 0:
        return f"aioquic is not installed for {sys.executable}"
    return None


AIOQUIC_MISSING = aioquic_available()


@pytest.mark.skipif(AIOQUIC_MISSING is not None, reason=str(AIOQUIC_MISSING))
def test_quicgo_client_against_aioquic_server(bench):
    client, _ = transfer(QUICGO_RUN, AIOQUIC_RUN, bench, ["big"])
    assert_quicgo_outputs(client)


@pytest.mark.skipif(AIOQUIC_MISSING is not None, reason=str(AIOQUIC_MISSING))
def test_aioquic_client_against_quicgo_server(bench):
    _, server = transfer(AIOQUIC_RUN, QUICGO_RUN, bench, ["big"])
    assert_quicgo_outputs(server)
