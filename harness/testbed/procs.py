"""Process helpers of the testbed: waiting for an endpoint to be ready, stopping a
process group, reading what a process left behind, and the CPU accounting a run
reports. Split from harness.testbed.topology, which starts the processes."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

from harness.endpoints import Stack
from harness.testbed import lifeline, netns


def wait_ready(proc: subprocess.Popen, stdout: Path, timeout_s: float, udp_port: int | None = None,
                who: str = "server") -> str | None:
    """Waits for the server's ready line, or for UDP `udp_port` bound in its namespace
    where given; returns None, or why neither came."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if stdout.exists() and '"ready"' in stdout.read_text(errors="replace"):
            return None
        if udp_port is not None and netns.udp_port_bound(proc.pid, udp_port):
            return None
        if proc.poll() is not None:
            return (f"{who} exited with {proc.returncode} before it was ready: {tail(stdout.parent / 'stderr')} "
                    f"(logs in {stdout.parent})")
        time.sleep(0.02)
    signal_ = f"listening on UDP {udp_port}" if udp_port is not None else "ready"
    return f"{who} not {signal_} within {timeout_s:.0f} s (logs in {stdout.parent})"


def role_name(stack: Stack, role: str) -> str:
    """`role`, naming the command where the stack runs one (an implementer must see which of theirs failed)."""
    if not stack.command:
        return role
    from harness.testbed.commands import describe

    return f"{role} command `{describe(stack)}`"


def stop_group(proc: subprocess.Popen, grace_s: float = 3.0) -> None:
    """SIGTERM the endpoint's process group, SIGKILL it if it lingers; always reap."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    if proc.returncode is not None:
        lifeline.release(proc)
    # Children that left the group are still inside the namespace; the namespace
    # sweep (netns.kill_namespace_processes) catches them.


def listening(ns: str, port: int) -> bool:
    """Whether a TCP socket listens on `port` inside namespace `ns`."""
    out = subprocess.run(lifeline.argv(["ip", "netns", "exec", ns, "ss", "-Htln", f"sport = :{port}"]),
                         capture_output=True, text=True, check=False).stdout
    return bool(out.strip())


def group_run_delay_s(pgid: int) -> float | None:
    """Run-queue wait of every thread of process group `pgid` so far (schedstat), s;
    None where the kernel does not report it."""
    total, seen = 0, False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # field 5 of stat: the process group
                continue
            for task in (stat.parent / "task").iterdir():
                total += int((task / "schedstat").read_text().split()[1])
                seen = True
        except (OSError, IndexError, ValueError):
            continue  # the process ended meanwhile
    return total / 1e9 if seen else None


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def tail(path: Path, limit: int = 400) -> str:
    if not path.exists():
        return ""
    lines = path.read_text(errors="replace").strip().splitlines()
    return (lines[-1] if lines else "")[-limit:]


