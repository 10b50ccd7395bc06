"""The testbed without root (harness/testbed/rootless.py, issue 22).

The real tests start `longlook transfer` as the user nobody. So that they do not
depend on how the host set /dev/net/tun, each runs in a mount namespace of its own
where /dev/net/tun is a fresh node of the TUN device with the mode under test
(0666, as Debian sets it, or 0600); the host's node is untouched.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.testbed import netns, rootless

REPO = Path(__file__).resolve().parents[1]
LONGLOOK = [sys.executable, "-m", "harness.cli"]
NOBODY = 65534
#: Bind a fresh TUN node with mode $1 over /dev/net/tun, then run the rest as nobody.
_AS_NOBODY = (
    'mknod "$DIR/tun" c 10 200 && chmod "$1" "$DIR/tun" && mount --bind "$DIR/tun" /dev/net/tun && shift && '
    f'exec setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups -- "$@"'
)


@pytest.fixture
def scratch():
    """A directory nobody can write (pytest's tmp_path is root's own, mode 0700)."""
    d = Path(tempfile.mkdtemp(prefix="ll-rootless-"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def as_nobody(scratch: Path, argv: list[str], tun_mode: str = "0666", **popen) -> subprocess.Popen:
    env = dict(os.environ, DIR=str(scratch), HOME=str(scratch), PYTHONDONTWRITEBYTECODE="1")
    env.pop(rootless.ENV, None)
    return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", _AS_NOBODY, "sh",
                             tun_mode, *argv], cwd=REPO, env=env, **popen)


def transfer_argv(out: Path, size: str = "200KB", rate: str = "10mbit") -> list[str]:
    return [*LONGLOOK, "transfer", "--impl", "aioquic", "--bytes", size, "--rate", rate, "--rtt", "40ms",
            "--out", str(out)]


def nobodys_pids() -> set[int]:
    """Live processes of the user nobody. Zombies do not count: they hold nothing but
    their pid, and this host's init does not reap orphans (tests/chaos.py)."""
    return {int(p.name) for p in Path("/proc").iterdir()
            if p.name.isdigit() and _uid(p) == NOBODY and netns.pid_alive(int(p.name))}


def _uid(proc: Path) -> int | None:
    try:
        return proc.stat().st_uid
    except OSError:
        return None


def host_namespaces() -> set[str]:
    return set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()


def left_behind(before: set[str]) -> set[str]:
    """Host namespaces created since `before` whose creator is gone: `ll-<pid>-<hex>`
    names its runner, so one whose runner still lives belongs to a test running beside
    this one (make test runs two at a time), not to the finished run."""
    def alive(name: str) -> bool:
        parts = name.split("-")
        return len(parts) > 2 and parts[1].isdigit() and os.path.exists(f"/proc/{parts[1]}")
    return {n for n in host_namespaces() - before if not alive(n)}


# -- what the host allows, said in one line -------------------------------------------------


def test_a_host_switch_that_forbids_user_namespaces_is_named_with_its_fix(tmp_path, monkeypatch):
    switch = tmp_path / "max_user_namespaces"
    switch.write_text("0\n")
    monkeypatch.setattr(rootless, "SWITCHES", ((str(switch), "0", "sudo sysctl -w user.max_user_namespaces=15000"),))
    why = rootless.obstacle()
    assert why is not None and str(switch) in why and "sudo sysctl -w user.max_user_namespaces=15000" in why
    switch.write_text("15000\n")
    assert rootless.obstacle() is None or "max_user_namespaces" not in rootless.obstacle()


def test_a_closed_tun_device_is_named_with_its_mode_and_fix(tmp_path, monkeypatch):
    tun = tmp_path / "tun"
    tun.write_text("")
    tun.chmod(0o600)
    monkeypatch.setattr(rootless, "SWITCHES", ())
    monkeypatch.setattr(rootless, "TUN", tun)
    monkeypatch.setattr(rootless.os, "access", lambda path, mode: False)
    why = rootless.obstacle()
    assert why is not None and f"{tun} is not open to user" in why and "(mode 0600)" in why
    assert f"sudo chmod 0666 {tun}" in why


def test_the_rootless_mode_can_be_refused(monkeypatch):
    monkeypatch.setenv(rootless.ENV, "off")
    assert "LONGLOOK_ROOTLESS=off" in rootless.obstacle()


# -- real runs as the user nobody ---------------------------------------------------------


@pytest.mark.netns
def test_a_user_without_root_runs_a_transfer_and_leaves_nothing(netns_ready, scratch):
    before_ns, before_pids = host_namespaces(), nobodys_pids()
    out = scratch / "run"
    proc = as_nobody(scratch, transfer_argv(out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, output
    assert "200000 bytes in" in output
    assert (out / "result.json").is_file() and (out / "pcap" / "server.pcap").stat().st_size > 0
    assert (out / "result.json").stat().st_uid == NOBODY  # written by the user, not by root
    # Its namespaces were bound in its own mount namespace, never in the host's /run/netns.
    assert left_behind(before_ns) == set()
    assert nobodys_pids() - before_pids == set()


@pytest.mark.netns
def test_a_closed_tun_device_stops_a_user_without_root_in_one_line(netns_ready, scratch):
    proc = as_nobody(scratch, transfer_argv(scratch / "run"), tun_mode="0600",
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "/dev/net/tun is not open to user nobody (mode 0600)" in output
    assert "sudo chmod 0666 /dev/net/tun" in output and "Traceback" not in output


@pytest.mark.netns
def test_a_rootless_runner_killed_mid_transfer_leaves_nothing(netns_ready, scratch):
    """SIGKILL to the runner: its endpoints, link and reaper are gone within a second,
    and with the last of them its mount namespace and every namespace bound there."""
    before_pids = nobodys_pids()
    out = scratch / "run"
    # 5 MB at 2 Mbit/s: about 20 s, killed a few seconds in.
    proc = as_nobody(scratch, transfer_argv(out, "5MB", "2mbit"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (out / "link.ndjson").is_file() or (out / "link.ndjson").stat().st_size == 0:
        assert proc.poll() is None and time.monotonic() < deadline, "the transfer never started"
        time.sleep(0.1)
    time.sleep(1.0)
    started = nobodys_pids() - before_pids
    assert len(started) >= 3, f"expected the runner, its link and endpoints; found {sorted(started)}"
    proc.send_signal(signal.SIGKILL)  # the exec chain ends in the runner itself
    proc.wait(timeout=10)
    time.sleep(1.0)
    left = nobodys_pids() - before_pids
    assert left == set(), {p: _cmdline(p) for p in left}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "(gone)"


def test_the_cli_enters_before_a_command_that_may_build_a_testbed(monkeypatch, capsys):
    """`reproduce` and `versions` start a progress bar (a thread) before their first
    testbed, and the kernel refuses a user namespace to a threaded process: the CLI
    enters first. Commands that never build a testbed do not."""
    from harness import cli

    calls = []
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(rootless, "enter", lambda: calls.append("enter"))
    assert cli.main(["reproduce", "--list"]) == 0
    assert calls == ["enter"]
    assert cli.main(["impls"]) == 0
    assert calls == ["enter"]
    capsys.readouterr()
