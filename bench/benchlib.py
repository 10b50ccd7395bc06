"""Small helpers for bench/emulator_bench.py: namespaces, processes, cleanup.

Self-contained on purpose (standard library and the `ip` command only), so the
benchmark does not depend on the internals of harness/testbed/netns.py or harness/testbed/link.py.

Every namespace made here is named ``llb-<owner pid>-<4 hex>-c|s``; a later run
deletes those whose owner is gone (what a killed run left behind). Addresses are
from 198.18.0.0/15 only and no namespace gets a default route.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

PREFIX = "llb-"
_NAME_RE = re.compile(r"^llb-(\d+)-[0-9a-f]{4}-[cs]$")
CLIENT_IP, SERVER_IP = "198.18.0.1", "198.19.0.1"
CLIENT_NET, SERVER_NET = "198.18.0.0/24", "198.19.0.0/24"
TCP_BUF_MAX = 128 * 1024 * 1024  # enough for a 25 MB window (12.5 MB BDP + 12.5 MB queue)

# Commands run, with namespace names and the temp dir replaced by placeholders.
COMMANDS: list[str] = []
_SUBST: dict[str, str] = {}


def log(msg: str) -> None:
    """Progress goes to stderr; stdout carries only the result line."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _record(argv: list[str]) -> None:
    text = shlex.join(argv)
    for real, placeholder in sorted(_SUBST.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(real, placeholder)
    if text not in COMMANDS:
        COMMANDS.append(text)


def placeholder(real: str, name: str) -> None:
    """Show `real` as `name` in the recorded commands."""
    _SUBST[real] = name


def run(argv: list[str], check: bool = True, timeout: float = 60) -> str:
    """Run a short command, record it, return its stdout."""
    _record(argv)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def in_ns(ns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


class Proc:
    """A background process in its own session, stopped by Lab cleanup."""

    def __init__(self, argv: list[str], stdout_path: Path | None = None, pipe_stdout: bool = False):
        _record(argv)
        self.argv = argv
        self.stderr_path = Path(f"/tmp/llb-{os.getpid()}-{secrets.token_hex(3)}.err")
        self._err = open(self.stderr_path, "w")
        out = subprocess.PIPE if pipe_stdout else (open(stdout_path, "w") if stdout_path else subprocess.DEVNULL)
        # `ip netns exec` execs the command, so this pid is the command's own.
        self.p = subprocess.Popen(argv, stdout=out, stderr=self._err, text=True, start_new_session=True)
        self.pid = self.p.pid

    def stderr_tail(self, n: int = 800) -> str:
        try:
            return self.stderr_path.read_text()[-n:]
        except OSError:
            return ""

    def wait_line(self, timeout: float) -> str:
        """Wait for one stdout line (needs pipe_stdout); raise if it dies or times out."""
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise RuntimeError(f"{self.argv[0]}: no ready line in {timeout} s; stderr: {self.stderr_tail()}")
        line = self.p.stdout.readline()
        if not line:
            self.p.wait(5)
            raise RuntimeError(f"{shlex.join(self.argv)} exited {self.p.returncode}: {self.stderr_tail()}")
        return line

    def rest_stdout(self) -> str:
        """What is left on a piped stdout (after stop())."""
        return self.p.stdout.read() if self.p.stdout else ""

    def wait(self, timeout: float) -> int:
        return self.p.wait(timeout)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; only this process's own group."""
        if self.p.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.p.wait(5)
            except ProcessLookupError:
                pass
        self._err.close()
        self.stderr_path.unlink(missing_ok=True)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def sweep_stale() -> None:
    """Delete llb- namespaces (and end the processes inside) of runs no longer alive."""
    root = Path("/run/netns")
    for entry in sorted(root.glob(PREFIX + "*")) if root.exists() else []:
        m = _NAME_RE.match(entry.name)
        if not m or _alive(int(m.group(1))):
            continue
        log(f"removing stale namespace {entry.name}")
        pids = subprocess.run(["ip", "netns", "pids", entry.name], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "del", entry.name], capture_output=True)


class Lab:
    """A client and a server namespace plus every process started for them.

    Use as a context manager: leaving it (normally, on an exception, or on
    Ctrl-C) stops the processes in reverse start order and deletes both
    namespaces, which removes their veth/TUN/TAP devices.
    """

    def __init__(self, tcp_buf_max: int = TCP_BUF_MAX):
        tag = f"{PREFIX}{os.getpid()}-{secrets.token_hex(2)}"
        self.client, self.server = tag + "-c", tag + "-s"
        placeholder(self.client, "$CLIENT_NS")
        placeholder(self.server, "$SERVER_NS")
        self.procs: list[Proc] = []
        self.tcp_buf_max = tcp_buf_max

    def __enter__(self) -> "Lab":
        try:
            for ns in (self.client, self.server):
                run(["ip", "netns", "add", ns])
                run(in_ns(ns, ["ip", "link", "set", "lo", "up"]))
                run(in_ns(ns, ["sysctl", "-q", "-w",
                               "net.ipv6.conf.all.disable_ipv6=1",
                               "net.ipv6.conf.default.disable_ipv6=1",
                               f"net.ipv4.tcp_rmem=4096 131072 {self.tcp_buf_max}",
                               f"net.ipv4.tcp_wmem=4096 65536 {self.tcp_buf_max}",
                               "net.ipv4.tcp_no_metrics_save=1"]))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()
        for ns in (self.client, self.server):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def start(self, argv: list[str], **kw) -> Proc:
        proc = Proc(argv, **kw)
        self.procs.append(proc)
        return proc

    def addresses(self, dev: str, via_client: str | None = None, via_server: str | None = None) -> None:
        """Client 198.18.0.1/24 and server 198.19.0.1/24 on `dev`, a route to the other side.

        With `via_*` the far subnet is routed through that gateway (ns-3's routers);
        without, it is on-link (veth, or longlook-link's point-to-point TUN).
        """
        for ns, ip, far, via in ((self.client, CLIENT_IP, SERVER_NET, via_client),
                                 (self.server, SERVER_IP, CLIENT_NET, via_server)):
            run(in_ns(ns, ["ip", "link", "set", dev, "txqueuelen", "5000", "up"]))
            run(in_ns(ns, ["ip", "addr", "add", ip + "/24", "dev", dev]))
            route = ["ip", "route", "add", far] + (["via", via] if via else []) + ["dev", dev]
            run(in_ns(ns, route))


class HostSysctls:
    """Raise net.core.rmem_max/wmem_max (not per-namespace) for the run, restore after."""

    KEYS = ("net.core.rmem_max", "net.core.wmem_max")

    def __init__(self, value: int = TCP_BUF_MAX):
        self.value, self.saved = value, {}

    def __enter__(self) -> "HostSysctls":
        for key in self.KEYS:
            path = Path("/proc/sys") / key.replace(".", "/")
            old = int(path.read_text())
            if old < self.value:
                self.saved[path] = old
                run(["sysctl", "-q", "-w", f"{key}={self.value}"])
        return self

    def __exit__(self, *exc) -> None:
        for path, old in self.saved.items():
            if int(path.read_text()) == self.value:  # unless someone else changed it since
                path.write_text(str(old))


def iperf3_json(text: str) -> dict:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise RuntimeError(f"iperf3 gave no JSON: {text[-500:]}") from e
