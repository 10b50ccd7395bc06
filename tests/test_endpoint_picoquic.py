"""The picoquic (aiopquic) endpoint follows docs/endpoints.md over 127.0.0.1.

Builds nothing: skips when `harness/endpoints/picoquic/build.sh` has not run.
Interop with the aioquic endpoint runs once that endpoint exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from harness import endpoints
from harness.testbed.certs import write_certs

SIZE = 2_000_000
ENDPOINTS = endpoints.ENDPOINTS_DIR


def _stack_or_skip(name: str) -> endpoints.Stack:
    try:
        stack = endpoints.load(name)
    except endpoints.StackError as e:
        pytest.skip(str(e))
    if not stack.is_built():
        pytest.skip(f"{name} endpoint not built: run {stack.directory / 'build.sh'}")
    return stack


@pytest.fixture(scope="module")
def picoquic() -> endpoints.Stack:
    return _stack_or_skip("picoquic")


@pytest.fixture
def site(tmp_path):
    """A www directory with a 2 MB and a small random file, and certificates."""
    www = tmp_path / "www"
    www.mkdir()
    (www / "big").write_bytes(os.urandom(SIZE))
    (www / "small").write_bytes(os.urandom(5000))
    write_certs(tmp_path / "certs")
    return tmp_path


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LL_")}
    env.pop("SSLKEYLOGFILE", None)
    env.pop("QLOGDIR", None)
    return {**env, **extra}


class Server:
    """A server endpoint started with `with`; SIGTERM on exit, exit status checked."""

    def __init__(self, stack: endpoints.Stack, site: Path, side: Path, **extra: str):
        self.port = _free_udp_port()
        side.mkdir(parents=True, exist_ok=True)
        env = _env(ROLE="server", TESTCASE=extra.pop("TESTCASE", "transfer"),
                   LL_ADDR="127.0.0.1", LL_PORT=str(self.port), LL_WWW=str(site / "www"),
                   LL_CERTS=str(site / "certs"), QLOGDIR=str(side / "qlog"),
                   SSLKEYLOGFILE=str(side / "keys.log"), LL_APPLOG=str(side / "app.ndjson"),
                   LL_TIMEOUT_S="60", **extra)
        self.proc = subprocess.Popen([str(stack.run)], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def __enter__(self) -> "Server":
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            ready = sel.select(15)
        line = self.proc.stdout.readline().strip() if ready else ""
        assert line and json.loads(line) == {"ready": True}, (
            f"server not ready: {line!r}; stderr: {self._stderr()}")
        return self

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.communicate()[1]

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        if exc[0] is None:
            assert self.proc.returncode == 0, f"server exited {self.proc.returncode}: {err}"


def run_client(stack: endpoints.Stack, port: int, names: list[str], side: Path,
               **extra: str) -> subprocess.CompletedProcess:
    side.mkdir(parents=True, exist_ok=True)
    env = _env(ROLE="client", TESTCASE=extra.pop("TESTCASE", "transfer"),
               REQUESTS=" ".join(f"https://127.0.0.1:{port}/{n}" for n in names),
               LL_DOWNLOADS=str(side / "downloads"), QLOGDIR=str(side / "qlog"),
               SSLKEYLOGFILE=str(side / "keys.log"), LL_APPLOG=str(side / "app.ndjson"),
               LL_TIMEOUT_S="60", **extra)
    proc = subprocess.run([str(stack.run)], env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, f"client exited {proc.returncode}: {proc.stderr}"
    return proc


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def qlog_cwnd_values(qlog_dir: Path) -> list[int]:
    """Every cwnd in the picoquic qlog (JSON draft-00, event_fields arrays)."""
    files = sorted(qlog_dir.glob("*.qlog"))
    assert len(files) == 1, f"expected one qlog per connection in {qlog_dir}: {files}"
    doc = json.loads(files[0].read_text())
    cwnds = []
    for trace in doc["traces"]:
        fields = trace["event_fields"]
        for row in trace["events"]:
            ev = dict(zip(fields, row))
            if ev["event"] == "metrics_updated" and "cwnd" in ev["data"]:
                cwnds.append(ev["data"]["cwnd"])
    return cwnds


def assert_side_artifacts(side: Path, stack_name: str, cc: str | None = None) -> list[dict]:
    """qlog with cwnd, a key log with 1-RTT secrets, an applog starting with the version."""
    if stack_name == "picoquic":
        assert qlog_cwnd_values(side / "qlog"), f"no cwnd in {side / 'qlog'}"
    else:
        assert any((side / "qlog").iterdir()), f"no qlog in {side / 'qlog'}"
    keys = (side / "keys.log").read_text()
    assert "CLIENT_TRAFFIC_SECRET_0" in keys and "SERVER_TRAFFIC_SECRET_0" in keys, keys[:300]
    records = [json.loads(line) for line in (side / "app.ndjson").read_text().splitlines()]
    first = records[0]
    assert first["event"] == "version" and first["stack"] == stack_name, first
    if cc is not None:
        assert first["cc"] == cc, first
    return records[1:]


@pytest.mark.slow
def test_transfer_over_loopback(picoquic, site, tmp_path):
    server_side, client_side = tmp_path / "server", tmp_path / "client"
    with Server(picoquic, site, server_side, LL_CC="cubic") as server:
        run_client(picoquic, server.port, ["big"], client_side, LL_CC="cubic")
    assert sha256(client_side / "downloads" / "big") == sha256(site / "www" / "big")
    for side in (server_side, client_side):
        events = assert_side_artifacts(side, "picoquic", cc="cubic")
        assert [e["event"] for e in events] == ["request_start", "request_done"]
        assert events[-1]["bytes"] == SIZE
    assert picoquic.version in (server_side / "app.ndjson").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("testcase", ["multiplexing", "appidle"])
def test_other_testcases(picoquic, site, tmp_path, testcase):
    names = ["big", "small", "small"]
    with Server(picoquic, site, tmp_path / "server", TESTCASE=testcase) as server:
        run_client(picoquic, server.port, names, tmp_path / "client", TESTCASE=testcase,
                   LL_THINK_MS="100")
    assert sha256(tmp_path / "client" / "downloads" / "big") == sha256(site / "www" / "big")
    events = assert_side_artifacts(tmp_path / "client", "picoquic", cc=picoquic.default_cc)
    kinds = [e["event"] for e in events]
    assert kinds.count("request_done") == len(names)
    if testcase == "appidle":
        starts = [e["t_us"] for e in events if e["event"] == "idle_start"]
        ends = [e["t_us"] for e in events if e["event"] == "idle_end"]
        assert len(starts) == len(ends) == len(names) - 1
        assert all(b - a >= 100_000 for a, b in zip(starts, ends)), (starts, ends)


def test_unsupported_cc_exits_127_quickly(picoquic, tmp_path):
    for extra in ({"LL_CC": "vegas"}, {"LL_CC": "mymod:Factory"}, {"LL_INITIAL_WINDOW": "10"},
                  {"LL_MAX_DATAGRAM_SIZE": "1400"}):
        started = time.monotonic()
        proc = subprocess.run(
            [str(picoquic.run)], capture_output=True, text=True, timeout=30,
            env=_env(ROLE="client", REQUESTS="https://127.0.0.1:9/x", **extra))
        took = time.monotonic() - started
        assert proc.returncode == 127, (extra, proc.returncode, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert took < 5, f"{extra}: took {took:.1f} s to refuse"


def _aioquic_or_skip() -> endpoints.Stack:
    if not (ENDPOINTS / "aioquic" / "run").exists():
        pytest.skip("harness/endpoints/aioquic/run does not exist yet")
    return _stack_or_skip("aioquic")


@pytest.mark.slow
def test_picoquic_client_against_aioquic_server(picoquic, site, tmp_path):
    aioquic = _aioquic_or_skip()
    with Server(aioquic, site, tmp_path / "server") as server:
        run_client(picoquic, server.port, ["big"], tmp_path / "client")
    assert sha256(tmp_path / "client" / "downloads" / "big") == sha256(site / "www" / "big")
    assert_side_artifacts(tmp_path / "client", "picoquic")


@pytest.mark.slow
def test_aioquic_client_against_picoquic_server(picoquic, site, tmp_path):
    aioquic = _aioquic_or_skip()
    with Server(picoquic, site, tmp_path / "server") as server:
        run_client(aioquic, server.port, ["big"], tmp_path / "client")
    assert sha256(tmp_path / "client" / "downloads" / "big") == sha256(site / "www" / "big")
    assert_side_artifacts(tmp_path / "server", "picoquic")
