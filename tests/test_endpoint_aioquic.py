"""The aioquic endpoint (harness/endpoints/aioquic) against docs/endpoints.md.

Runs server and client over 127.0.0.1 (no namespaces) with the interpreter running
pytest, which must have the pinned aioquic: the test builds nothing and skips when
it is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.testbed.certs import write_certs

ROOT = Path(__file__).resolve().parent.parent
ENDPOINT = ROOT / "harness" / "endpoints" / "aioquic"
RUN = ENDPOINT / "run"
PIN = "1.7.2"
SIZE = 2_000_000


def _aioquic_version() -> str | None:
    try:
        import aioquic
    except ImportError:
        return None
    return aioquic.__version__


pytestmark = pytest.mark.skipif(
    _aioquic_version() != PIN or not os.access(RUN, os.X_OK),
    reason=f"aioquic endpoint not built: needs aioquic=={PIN} in {sys.executable} "
           f"(harness/endpoints/aioquic/build.sh) and an executable {RUN}",
)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pair:
    """A server and client of one run: directories, environments, processes."""

    def __init__(self, tmp: Path, certs: Path, run: Path = RUN):
        self.tmp, self.certs, self.run = tmp, certs, run
        self.port = free_udp_port()
        self.www = tmp / "www"
        self.www.mkdir()
        self.server_proc: subprocess.Popen | None = None

    def env(self, role: str, **extra: str) -> dict[str, str]:
        env = dict(os.environ, ROLE=role, LL_PYTHON=sys.executable, LL_TIMEOUT_S="60",
                   QLOGDIR=str(self.tmp / f"qlog-{role}"),
                   SSLKEYLOGFILE=str(self.tmp / f"keys-{role}.log"),
                   LL_APPLOG=str(self.tmp / f"app-{role}.ndjson"))
        env.update(extra)
        return env

    def start_server(self, **extra: str) -> None:
        env = self.env("server", LL_ADDR="127.0.0.1", LL_PORT=str(self.port),
                       LL_WWW=str(self.www), LL_CERTS=str(self.certs), **extra)
        env.pop("LL_TIMEOUT_S")
        self.server_proc = subprocess.Popen([str(self.run)], env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True)
        line = self.server_proc.stdout.readline()
        assert json.loads(line) == {"ready": True}, self.server_proc.stderr.read()

    def client(self, names: list[str], testcase: str = "transfer", **extra: str):
        env = self.env("client", TESTCASE=testcase, LL_DOWNLOADS=str(self.tmp / "downloads"),
                       REQUESTS=" ".join(f"https://127.0.0.1:{self.port}/{n}" for n in names),
                       **extra)
        return subprocess.run([str(self.run)], env=env, capture_output=True, text=True,
                              timeout=90)

    def stop_server(self) -> subprocess.CompletedProcess:
        self.server_proc.terminate()
        out, err = self.server_proc.communicate(timeout=10)
        return subprocess.CompletedProcess(self.server_proc.args,
                                           self.server_proc.returncode, out, err)

    def applog(self, role: str) -> list[dict]:
        return [json.loads(l) for l in (self.tmp / f"app-{role}.ndjson").read_text().splitlines()]


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("certs")
    write_certs(directory)
    return directory


@pytest.fixture
def pair(tmp_path, certs):
    p = Pair(tmp_path, certs)
    yield p
    if p.server_proc and p.server_proc.poll() is None:
        p.server_proc.kill()
        p.server_proc.wait()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def qlog_events(directory: Path) -> list[dict]:
    files = sorted(directory.glob("*.qlog"))
    assert len(files) == 1, f"expected one qlog in {directory}, found {files}"
    doc = json.loads(files[0].read_text())
    return doc["traces"][0]["events"]


def test_transfer_2mb(pair):
    (pair.www / "file2m").write_bytes(os.urandom(SIZE))
    pair.start_server(LL_CC="cubic")
    done = pair.client(["file2m"], LL_CC="cubic")
    server = pair.stop_server()
    assert done.returncode == 0, done.stderr
    assert server.returncode == 0, server.stderr
    assert sha256(pair.tmp / "downloads" / "file2m") == sha256(pair.www / "file2m")

    for role in ("client", "server"):
        events = qlog_events(pair.tmp / f"qlog-{role}")
        metrics = [e["data"] for e in events if e["name"] == "recovery:metrics_updated"]
        assert any("cwnd" in m for m in metrics), f"{role} qlog has no cwnd"
        keys = (pair.tmp / f"keys-{role}.log").read_text()
        assert "CLIENT_TRAFFIC_SECRET_0 " in keys
        log = pair.applog(role)
        assert log[0]["event"] == "version"
        assert (log[0]["stack"], log[0]["version"], log[0]["cc"]) == ("aioquic", PIN, "cubic")
    server_events = [e["event"] for e in pair.applog("server")[1:]]
    assert server_events == ["request_start", "request_done"]
    assert pair.applog("client")[-1]["bytes"] == SIZE


def test_multiplexing_and_appidle(pair):
    names = [f"f{i}" for i in range(4)]
    for n in names:
        (pair.www / n).write_bytes(os.urandom(50_000))
    pair.start_server()
    mux = pair.client(names, "multiplexing")
    assert mux.returncode == 0, mux.stderr
    idle = pair.client(names[:2], "appidle", LL_THINK_MS="200")
    assert idle.returncode == 0, idle.stderr
    assert pair.stop_server().returncode == 0
    for n in names:
        assert sha256(pair.tmp / "downloads" / n) == sha256(pair.www / n)
    # Both client runs appended to one applog: the appidle run is the last 7 lines.
    tail = [e["event"] for e in pair.applog("client")[-7:]]
    assert tail == ["version", "request_start", "request_done", "idle_start", "idle_end",
                    "request_start", "request_done"]
    idle_start, idle_end = pair.applog("client")[-4:-2]
    assert idle_end["t_us"] - idle_start["t_us"] >= 200_000
    assert pair.applog("client")[0]["cc"] == "newreno"  # aioquic's default, reported as such
    assert len(list((pair.tmp / "qlog-server").glob("*.qlog"))) == 2


def test_cc_by_import_path(pair):
    # The factory leaves a mark when aioquic instantiates it, proving it is used.
    module = pair.tmp / "mutant_cc.py"
    module.write_text(
        "import os\n"
        "from aioquic.quic.congestion.reno import RenoCongestionControl\n"
        "class Marked(RenoCongestionControl):\n"
        "    def __init__(self, *, max_datagram_size):\n"
        "        super().__init__(max_datagram_size=max_datagram_size)\n"
        "        open(os.environ['MARK'], 'a').write('x')\n")
    (pair.www / "f").write_bytes(os.urandom(100_000))
    mark = pair.tmp / "mark"
    pair.start_server(LL_CC="mutant_cc:Marked", PYTHONPATH=str(pair.tmp), MARK=str(mark))
    done = pair.client(["f"])
    assert pair.stop_server().returncode == 0
    assert done.returncode == 0, done.stderr
    assert mark.read_text() == "x"
    assert pair.applog("server")[0]["cc"] == "mutant_cc:Marked"


def test_cc_import_error_is_a_failure_not_a_skip(pair):
    done = pair.client(["f"], LL_CC="no_such_module_xyz:Factory")
    assert done.returncode not in (0, 127)
    assert "no_such_module_xyz" in done.stderr


@pytest.mark.parametrize("option", [{"LL_CC": "bbr"}, {"LL_INITIAL_WINDOW": "4"},
                                    {"LL_MAX_DATAGRAM_SIZE": "1000"},
                                    {"TESTCASE": "zerortt"}])
@pytest.mark.parametrize("role", ["client", "server"])
def test_unsupported_option_exits_127_quickly(pair, role, option):
    env = pair.env(role, REQUESTS="https://127.0.0.1:1/x", **option)
    start = time.monotonic()
    done = subprocess.run([str(RUN)], env=env, capture_output=True, text=True, timeout=20)
    assert done.returncode == 127, done.stderr
    assert time.monotonic() - start < 10
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("aioquic: ")
