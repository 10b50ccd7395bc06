"""Chaos kills: a real runner doing a real transfer is SIGKILLed at a random moment,
then everything it created is looked for (issue 22, "Nothing outlives its runner").

Used by tests/test_chaos_kill.py (a few kills) and bench/chaos_kill.py (100). A
runner is `longlook transfer`, a small script driving `Testbed` with a competing
kernel TCP flow (iperf3), or pytest running a test that transfers through a
`Testbed`, so endpoints, the link, competitors and helpers are all in play. Its
TMPDIR is a directory of its own, so every temporary directory it makes (the
reaper's, the link's control socket's) can be checked for.

The calling process becomes a child subreaper while it kills: the runner's orphans
are then re-parented to it, so it can find any descendant that escaped (and reap
the zombies, which this host's init does not).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.testbed import lifeline, netns

REPO = Path(__file__).resolve().parents[1]
#: The runner's kill falls uniformly in [0, window] s: start-up, set-up, transfer and
#: teardown (on the 2-core host a transfer's runner lives ~3.5 s, with a competitor
#: ~5 s, pytest ~4 s of which 2.5 s start-up; a kill after the runner ended checks
#: its normal exit).
WINDOWS = {"transfer": 3.5, "competitor": 5.0, "pytest": 4.5}
MODES = tuple(WINDOWS)
#: What the pytest runner runs: a real transfer through a Testbed in the pytest process.
PYTEST_TARGET = "tests/test_testbed.py::test_qlog_off_leaves_no_qlog"
#: The bar of issue 22: nothing is left one second after the kill.
BAR_S = 1.0
_PR_SET_CHILD_SUBREAPER = 36
# A long directory name: the link's control socket path then exceeds sun_path, so the
# link makes its temporary directory (llctl-*), which a kill must not leave either.
_DEEP = "run-" + "x" * 72

COMPETITOR_RUNNER = """
import sys
from harness import endpoints
from harness.cli import link_schedule
from harness.schedule import TransferPlan
from harness.testbed.topology import EndpointOptions, Testbed, interrupts_as_exceptions
schedule = link_schedule(10_000_000, 40_000, 0.0, None, 1)
with interrupts_as_exceptions(), Testbed(schedule, sys.argv[1]) as bed:
    plan = TransferPlan(sizes=(1_000_000,), tcp_flows=1)
    result = bed.transfer(endpoints.load(sys.argv[2]), plan, EndpointOptions(timeout_s=30))
sys.exit(0 if result.ok else 1)
"""


@dataclass
class Kill:
    """One kill: when, in which phase, and what was left when."""

    mode: str
    delay_s: float
    phase: str = ""
    #: Seconds from the kill until nothing was left (None: something stayed past the wait).
    clean_s: float | None = None
    #: What was still there one second after the kill (empty: the bar is met).
    left_at_bar: list[str] = field(default_factory=list)
    #: What was still there when the wait ended.
    left: list[str] = field(default_factory=list)
    #: The runner's other descendants alive one second after the kill (no testbed's).
    others_at_bar: list[str] = field(default_factory=list)


def runner_argv(mode: str, impl: str, out: Path) -> list[str]:
    if mode == "transfer":
        return [sys.executable, "-m", "harness.cli", "transfer", "--impl", impl, "--bytes", "1MB",
                "--rate", "10mbit", "--rtt", "40ms", "--timeout", "30s", "--out", str(out)]
    if mode == "pytest":
        # Its base temporary directory is pytest's kept output (like --out), not a
        # temporary directory of the run: outside the run's TMPDIR. (aioquic always.)
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", PYTEST_TARGET,
                "--basetemp", str(out)]
    return [sys.executable, "-c", COMPETITOR_RUNNER, str(out), impl]


@contextlib.contextmanager
def subreaper():
    """This process adopts the orphans of its descendants while inside."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        _reap()


def kill_once(workdir: Path, mode: str, impl: str, delay_s: float, wait_s: float = 2.0,
              env: dict[str, str] | None = None) -> Kill:
    """Starts a runner in `workdir`, SIGKILLs it after `delay_s`, and watches for
    `wait_s` what it left. Call inside :func:`subreaper`. Whatever is left at the
    end is removed (the next kill must start clean)."""
    tmp = workdir / "tmp"
    tmp.mkdir(parents=True)
    out = workdir / _DEEP
    run_env = dict(os.environ, TMPDIR=str(tmp), **(env or {}))
    kill = Kill(mode, delay_s)
    with (workdir / "runner.log").open("wb") as log:
        runner = subprocess.Popen(runner_argv(mode, impl, out), cwd=REPO, env=run_env,
                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        runner.wait(timeout=delay_s)
        kill.phase = "finished"
    except subprocess.TimeoutExpired:
        pass
    seen = Snapshot(runner.pid, out)
    kill.phase = kill.phase or seen.phase
    runner.send_signal(signal.SIGKILL)  # nothing once it has ended and been reaped
    t0 = time.monotonic()
    runner.wait()
    while True:
        now = time.monotonic() - t0
        left = seen.leftovers(tmp, thorough=True)
        if not left and kill.clean_s is None:
            kill.clean_s = now
        if now >= BAR_S and not kill.left_at_bar:
            kill.left_at_bar = left or []
            kill.others_at_bar = list(seen.others)
            if not left:
                break  # clean at the bar: done
        if now >= wait_s:
            kill.left = left
            break
        _reap()
        time.sleep(0.01)
    seen.remove_leftovers(tmp)
    return kill


class Snapshot:
    """What the runner had made at the moment of the kill, and how to find its remains."""

    def __init__(self, runner: int, out: Path):
        self.runner = runner
        # This process's own children (e.g. its own reaper, when it ran a testbed
        # itself): not orphans of the runner.
        self.own_children = set(_children(os.getpid())) - {runner}
        self.prefix = f"ll-{runner}-"
        self.others: list[str] = []
        self.names = [n for n in netns.list_ours() if n.startswith(self.prefix)]
        # Held open until the end, so that the kernel cannot give a freed namespace's
        # inode number to another runner's new one (a false leftover); this
        # process's own fds are not counted as references.
        self.fds, self.inodes = [], set()
        for name in self.names:
            with contextlib.suppress(OSError):
                fd = os.open(f"/run/netns/{name}", os.O_RDONLY | os.O_CLOEXEC)
                st = os.fstat(fd)
                self.fds.append(fd)
                self.inodes.add((st.st_dev, st.st_ino))
        self.emulators = list(netns.emulator_pids(set(self.names))) if self.names else []
        self.inside = [p for n in self.names for p in netns.pids_in(n)]
        self.tuns = [(p, dev) for p in self.emulators for dev in _tun_devices(p)]
        self.processes = {p: _starttime(p) for p in _descendants(runner) + self.emulators + self.inside}
        # Endpoints and competitors lead sessions of their own; helpers do not.
        leaders = [p for p in self.inside if (_stat_fields(p) or [""] * 4)[3] == str(p)]
        if not self.names:
            done = out.exists() and any(out.rglob("result.json"))
            self.phase = "after the transfer" if done else "start-up"
        elif not self.emulators:
            self.phase = "namespaces"
        elif not leaders:
            self.phase = "link"
        else:
            self.phase = "endpoints"

    def leftovers(self, tmp: Path, thorough: bool = True) -> list[str]:
        """Everything the run's testbed made that is still there, one line each
        (empty: nothing). The runner's other descendants still alive go to
        `self.others` (a tshark of the observation stage: no process of the testbed)."""
        alive = [p for p, start in self.processes.items() if _starttime(p) == start and netns.pid_alive(p)]
        # Orphans re-parented to this subreaper that the snapshot missed (started
        # between the snapshot and the kill, or a daemonised grandchild).
        alive += [p for p in self._orphans() if p not in self.processes]
        left, self.others = [], []
        for p in alive:
            (left if self._testbed(p) else self.others).append(f"process {p} {_cmdline(p)}")
        known = set(self.processes)
        left += [f"namespace {n}" for n in _ip_netns_list() if n.startswith(self.prefix)]
        left += [f"emulator {p}" for p, named in netns.emulator_pids().items()
                 if any(n.startswith(self.prefix) for n in named) and p not in known]
        left += [f"tun {dev} held by {p}" for p, dev in self.tuns if netns.pid_alive(p)]
        left += [f"temporary {e.name}" for e in tmp.iterdir()] if tmp.exists() else []
        left += [f"container {c}" for c in _containers(self.runner)]
        if thorough and not left and self.inodes:
            # A namespace without its name lives on while a process is in it or an
            # fd holds it; with it its TUN devices. Neither may be.
            left += [f"namespace inode {i} still referenced by {p}" for p, i in _ns_references(self.inodes)]
        return left

    def _testbed(self, pid: int) -> bool:
        """Whether process `pid` is one the testbed started: inside one of the run's
        namespaces, the emulator, `ip netns`, the lifeline's wrapper or the reaper."""
        with contextlib.suppress(OSError):
            st = os.stat(f"/proc/{pid}/ns/net")
            if (st.st_dev, st.st_ino) in self.inodes:
                return True
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        program = os.path.basename(argv[0])
        return (program.startswith(b"longlook-link") or (program == b"ip" and argv[1:2] == [b"netns"])
                or any(b"PR_SET_PDEATHSIG" in a or a.endswith(b"harness/testbed/reaper.py") for a in argv))

    def _orphans(self) -> list[int]:
        """The runner's descendants re-parented to this subreaper, still alive."""
        return [p for p in _children(os.getpid()) if p not in self.own_children and p != self.runner]

    def remove_leftovers(self, tmp: Path) -> None:
        """Removes what a kill left (the mechanism is off, or failed): the next kill starts clean."""
        for p, start in self.processes.items():
            if _starttime(p) == start:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)
        for p in self._orphans():
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        netns.sweep_stale()
        for c in _containers(self.runner):
            subprocess.run(["docker", "rm", "--force", c], capture_output=True, check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()
        _reap()


def mode_of(i: int) -> str:
    """Kills take turns: `longlook transfer`, the runner with a competitor, pytest."""
    return MODES[i % len(MODES)]


def random_delays(n: int, rng: random.Random) -> list[float]:
    """`n` random kill moments, stratified: kill i falls uniformly within the i-th of n
    equal slices of its runner's window, so that even a few kills reach start-up,
    set-up, the transfer and the teardown; then shuffled."""
    fractions = [(i + rng.random()) / n for i in range(n)]
    rng.shuffle(fractions)
    return [WINDOWS[mode_of(i)] * f for i, f in enumerate(fractions)]


def _ip_netns_list() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


_DOCKER: bool | None = None


def docker_available() -> bool:
    global _DOCKER
    if _DOCKER is None:
        try:
            _DOCKER = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                                     timeout=10, check=False).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _DOCKER = False
    return _DOCKER


def _containers(owner: int) -> list[str]:
    if not docker_available():
        return []
    out = subprocess.run(["docker", "ps", "--all", "--quiet", "--filter", f"label=longlook.owner={owner}"],
                         capture_output=True, text=True, check=False).stdout
    return out.split()


def _stat_fields(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _starttime(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[19] if fields else None


def _children(parent: int) -> list[int]:
    """Live (not zombie) children of `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and fields[0] != "Z" and int(fields[1]) == parent:
                found.append(int(entry.name))
    return found


def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields:
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return "?"


def _tun_devices(pid: int) -> list[str]:
    """Names of the TUN devices process `pid` holds (fdinfo's `iff:` line)."""
    devices = []
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fdinfo").iterdir():
            with contextlib.suppress(OSError):
                for line in fd.read_text().splitlines():
                    if line.startswith("iff:"):
                        devices.append(line.split()[1])
    return devices


def _ns_references(inodes: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """(pid, inode) of each live process inside one of `inodes`, or holding an fd to one."""
    wanted = {ino for _, ino in inodes}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid() or not netns.pid_alive(int(entry.name)):
            continue
        with contextlib.suppress(OSError):
            st = os.stat(entry / "ns" / "net")
            if (st.st_dev, st.st_ino) in inodes:
                found.append((int(entry.name), st.st_ino))
                continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("net:[") and int(target[5:-1]) in wanted:
                        found.append((int(entry.name), int(target[5:-1])))
    return found


def _reap() -> None:
    """Reaps this process's exited children (the runner's adopted orphans)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def lifeline_env(on: bool) -> dict[str, str]:
    return {lifeline.ENV: "on" if on else "off"}
