"""The kernel TCP + TLS 1.3 endpoint (harness/endpoints/tcp) against docs/endpoints.md.

Runs server and client over 127.0.0.1 (no namespaces). The endpoint needs only the
standard library; the test skips when `run` is missing or the kernel lacks a CC it
asks for. There is no QUIC interop to test: TCP talks only to itself.
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
ENDPOINT = ROOT / "harness" / "endpoints" / "tcp"
RUN = ENDPOINT / "run"
SIZE = 2_000_000
AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")

pytestmark = pytest.mark.skipif(not os.access(RUN, os.X_OK),
                                reason=f"tcp endpoint missing: no executable {RUN}")


def require_cc(*names: str) -> None:
    have = AVAILABLE_CC.read_text().split() if AVAILABLE_CC.exists() else []
    missing = [n for n in names if n not in have]
    if missing:
        pytest.skip(f"kernel lacks TCP CC {missing} (has {have})")


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pair:
    """A server and client of one run: directories, environments, processes."""

    def __init__(self, tmp: Path, certs: Path):
        self.tmp, self.certs = tmp, certs
        self.port = free_tcp_port()
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
        self.server_proc = subprocess.Popen([str(RUN)], env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True)
        line = self.server_proc.stdout.readline()
        assert json.loads(line) == {"ready": True}, self.server_proc.stderr.read()

    def client(self, names: list[str], testcase: str = "transfer", **extra: str):
        env = self.env("client", TESTCASE=testcase, LL_DOWNLOADS=str(self.tmp / "downloads"),
                       REQUESTS=" ".join(f"https://127.0.0.1:{self.port}/{n}" for n in names),
                       **extra)
        return subprocess.run([str(RUN)], env=env, capture_output=True, text=True, timeout=90)

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


def test_transfer_2mb(pair):
    require_cc("cubic")
    (pair.www / "file2m").write_bytes(os.urandom(SIZE))
    pair.start_server(LL_CC="cubic")
    done = pair.client(["file2m"], LL_CC="cubic")
    server = pair.stop_server()
    assert done.returncode == 0, done.stderr
    assert server.returncode == 0, server.stderr
    assert sha256(pair.tmp / "downloads" / "file2m") == sha256(pair.www / "file2m")
    caps = json.loads((ENDPOINT / "caps.json").read_text())
    assert caps["honours"]["qlog"] is False  # so no qlog is expected, only the directory
    for role in ("client", "server"):
        assert (pair.tmp / f"qlog-{role}").is_dir()
        assert "CLIENT_TRAFFIC_SECRET_0 " in (pair.tmp / f"keys-{role}.log").read_text()
        log = pair.applog(role)
        assert log[0]["event"] == "version"
        assert (log[0]["stack"], log[0]["version"], log[0]["cc"]) == ("tcp", os.uname().release,
                                                                      "cubic")
    start, done_ev = pair.applog("server")[1:]
    assert (start["event"], done_ev["event"]) == ("request_start", "request_done")
    assert start["cc"] == "cubic" and done_ev["bytes"] == SIZE
    assert pair.applog("client")[-1]["bytes"] == SIZE


def test_multiplexing_is_parallel_flows_with_the_chosen_cc(pair):
    require_cc("bbr", "reno")
    names = [f"f{i}" for i in range(3)]
    for n in names:
        (pair.www / n).write_bytes(os.urandom(300_000))
    pair.start_server(LL_CC="bbr")
    done = pair.client(names, "multiplexing", LL_CC="newreno")
    assert pair.stop_server().returncode == 0
    assert done.returncode == 0, done.stderr
    for n in names:
        assert sha256(pair.tmp / "downloads" / n) == sha256(pair.www / n)
    starts = [e for e in pair.applog("server") if e["event"] == "request_start"]
    assert len({e["cport"] for e in starts}) == 3, "one TCP connection per request"
    assert {e["cc"] for e in starts} == {"bbr"}
    client_version = pair.applog("client")[0]
    assert (client_version["cc"], client_version["kernel_cc"]) == ("newreno", "reno")


def test_appidle_logs_think_time(pair):
    for n in ("a", "b"):
        (pair.www / n).write_bytes(os.urandom(10_000))
    pair.start_server()
    done = pair.client(["a", "b"], "appidle", LL_THINK_MS="200")
    assert pair.stop_server().returncode == 0
    assert done.returncode == 0, done.stderr
    log = pair.applog("client")
    assert [e["event"] for e in log[1:]] == ["request_start", "request_done", "idle_start",
                                             "idle_end", "request_start", "request_done"]
    assert log[4]["t_us"] - log[3]["t_us"] >= 200_000


def test_missing_file_fails_the_client(pair):
    pair.start_server()
    done = pair.client(["nope"], LL_TIMEOUT_S="20")
    pair.stop_server()
    assert done.returncode == 1


@pytest.mark.parametrize("option", [{"LL_CC": "no_such_cc"}, {"LL_CC": "mod:Factory"},
                                    {"LL_INITIAL_WINDOW": "4"}, {"TESTCASE": "zerortt"}])
@pytest.mark.parametrize("role", ["client", "server"])
def test_unsupported_option_exits_127_quickly(pair, role, option):
    env = pair.env(role, REQUESTS="https://127.0.0.1:1/x", **option)
    start = time.monotonic()
    done = subprocess.run([str(RUN)], env=env, capture_output=True, text=True, timeout=20)
    assert done.returncode == 127, done.stderr
    assert time.monotonic() - start < 10
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("tcp: ")
