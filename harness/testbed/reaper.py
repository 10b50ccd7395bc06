"""The reaper of one runner (harness/testbed/lifeline.py starts it; docs/testbed.md).

    python -I -S reaper.py <runner pid> <runner start time> <run dir> <goodbye fd>

Standard library only, run isolated and without site-packages: it must start fast,
and nothing the runner's environment or checkout does may stop it from cleaning up.

It waits on a pidfd for the runner to exit, or for the runner's goodbye on the pipe
(a normal exit, after the runner's own cleanup). Then it reads the registry the
runner appended to (``+ kind value [start time]`` on creation, ``- kind value`` on
removal) and removes whatever is still registered: it SIGKILLs the registered
process groups and pids and every process inside the registered namespaces, deletes
those namespaces, removes containers and temporary directories. It repeats the
process and namespace passes until nothing has turned up for SETTLE_S: a helper the
runner forked just before it died can still finish creating a namespace, or enter
one, a few milliseconds later. Then it removes its run directory and exits; on a
failure it keeps the directory, with reaper.log saying what could not be removed.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

NETNS_DIR = Path("/run/netns")
#: A pass that finds nothing for this long ends the cleanup, s.
SETTLE_S = 0.2
PASS_INTERVAL_S = 0.02
#: Never clean for longer than this (a process that will not die, a hung engine), s.
GIVE_UP_S = 20.0
_MNT_DETACH = 2
_LINK_BINARY = b"longlook-link"
#: The device of the namespace filesystem: a bound namespace file shows it.
_NSFS_DEV = os.stat("/proc/self/ns/net").st_dev


def main(argv: list[str]) -> int:
    runner, start, rundir, goodbye = int(argv[1]), argv[2], Path(argv[3]), int(argv[4])
    # A terminal's Ctrl-C or hang-up is for the runner; this process has its own session anyway.
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    said_goodbye = _wait_for_runner(runner, start, goodbye)
    try:
        # After a goodbye the runner has cleaned up and forks nothing more: one pass.
        errors = Cleanup(runner, rundir / "registry").run(settle_s=0.0 if said_goodbye else SETTLE_S)
    except Exception as e:  # a bug here must still leave a trace, not vanish with stderr
        errors = [f"reaper failed: {e!r}"]
    if errors:
        (rundir / "reaper.log").write_text("".join(f"{e}\n" for e in errors))
        return 1
    shutil.rmtree(rundir, ignore_errors=True)
    return 0


def _wait_for_runner(pid: int, start: str, goodbye: int) -> bool:
    """Returns when the runner has exited (False) or said goodbye (True)."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        pidfd = None  # already gone (ESRCH), or a kernel before 5.3 (ENOSYS)
    # The pid names the runner only while its start time matches (no reuse).
    if _starttime(pid) != start:
        return False
    poller = select.poll()
    poller.register(goodbye, select.POLLIN)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    while True:
        # Without a pidfd: look every 50 ms. A goodbye, or EOF once every copy of the
        # pipe's write end is closed, ends the wait as well.
        for fd, _ in poller.poll(None if pidfd is not None else 50):
            return fd == goodbye and os.read(goodbye, 16) != b""  # b"": EOF, no goodbye
        if not _alive(pid) or _starttime(pid) != start:
            return False


class Cleanup:
    """What one dead (or departing) runner left, removed in passes."""

    def __init__(self, runner: int, registry: Path):
        self.runner = runner
        self.active = read_registry(registry)
        self.errors: list[str] = []
        #: An open fd on each registered namespace, and its (st_dev, st_ino): a process
        #: that entered it late is still found by it after its name is gone. The fd
        #: keeps the namespace itself (not its devices) until this process exits, so
        #: that the kernel cannot hand its inode number to another runner's new one.
        self.held: dict[str, int] = {}
        self.inodes: set[tuple[int, int]] = set()
        # Only names made for this runner, whatever the registry says: another live
        # runner's namespaces are never touched.
        prefix = f"ll-{runner}-"
        self.names = {n for n in self.active["netns"] if n.startswith(prefix)}

    def run(self, settle_s: float = SETTLE_S) -> list[str]:
        if not any(self.active.values()):
            return []  # a normal exit after the runner's own cleanup
        try:
            self._run(settle_s)
        finally:
            for fd in self.held.values():
                os.close(fd)
        return self.errors

    def _run(self, settle_s: float) -> None:
        self._containers()  # first: the engine is the slowest to answer
        deadline = time.monotonic() + GIVE_UP_S
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            if self._pass():
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= settle_s:
                break
            time.sleep(PASS_INTERVAL_S)
        else:
            self.errors.append(f"processes of runner {self.runner} still alive after {GIVE_UP_S:.0f} s")
        self._containers(labelled_only=True)
        for path in self.active["tmpdir"]:
            if os.path.isabs(path):
                shutil.rmtree(path, ignore_errors=True)

    def _pass(self) -> bool:
        """Kills what is left and deletes the namespaces; True if anything was found."""
        for name in self.names - self.held.keys():
            try:
                fd = os.open(NETNS_DIR / name, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue  # not (yet) made
            st = os.fstat(fd)
            if st.st_dev != _NSFS_DEV:
                os.close(fd)  # the mount point of a namespace still being made: next pass
                continue
            self.held[name] = fd
            self.inodes.add((st.st_dev, st.st_ino))
        victims = self._victims()
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        found = bool(victims)
        # Killed processes release a namespace by themselves; its name goes now. The
        # TUN devices inside go when the emulator holding them is dead.
        for name in self.names:
            path = NETNS_DIR / name
            if path.exists():
                found = True
                _umount(path)
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass
                except OSError as e:
                    self.errors.append(f"cannot remove namespace {name}: {e}")
        return found

    def _victims(self) -> list[int]:
        """Live processes of the runner: in a registered group (whose leader is gone
        or still the registered process), a registered pid, inside a registered
        namespace, or an emulator naming one."""
        groups = {int(p) for p, s in self.active["pgid"].items() if _same_or_gone(int(p), s)}
        pids = {int(p) for p, s in self.active["pid"].items() if _starttime(int(p)) == s}
        names = {n.encode() for n in self.names}
        found = []
        me = os.getpid()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) in (me, 1):
                continue
            pid = int(entry.name)
            try:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] == "Z":
                    continue
                if pid in pids or int(fields[2]) in groups or self._inside(entry.path):
                    found.append(pid)
                    continue
                cmd = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue  # exited meanwhile, or a kernel thread
            if os.path.basename(cmd[0]).startswith(_LINK_BINARY) and names.intersection(cmd):
                found.append(pid)
        return found

    def _inside(self, proc_dir: str) -> bool:
        if not self.inodes:
            return False
        try:
            st = os.stat(os.path.join(proc_dir, "ns", "net"))
        except OSError:
            return False
        return (st.st_dev, st.st_ino) in self.inodes

    def _containers(self, labelled_only: bool = False) -> None:
        """Removes the registered containers, then (second call) any the engine
        created for this runner meanwhile (a `docker run` it had sent before dying)."""
        if not self.active["container"]:
            return
        names = [] if labelled_only else list(self.active["container"])
        try:
            if labelled_only:
                listed = subprocess.run(
                    ["docker", "ps", "--all", "--quiet", "--filter", f"label=longlook.owner={self.runner}"],
                    capture_output=True, text=True, timeout=10, check=False)
                names = listed.stdout.split()
            if names:
                subprocess.run(["docker", "rm", "--force", "--volumes", *names],
                               capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.errors.append(f"cannot remove containers {names}: {e}")


def read_registry(path: Path) -> dict[str, dict[str, str]]:
    """{kind: {value: extra}} of what is registered and not removed again. A last
    line without its newline (a write cut short) is ignored."""
    active: dict[str, dict[str, str]] = {k: {} for k in ("pgid", "pid", "netns", "container", "tmpdir")}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return active
    lines = text.split("\n")[:-1]  # what follows the last newline is incomplete
    for line in lines:
        parts = line.split(" ", 3)
        if len(parts) < 3 or parts[1] not in active:
            continue
        op, kind, value = parts[:3]
        if op == "+":
            active[kind][value] = parts[3] if len(parts) > 3 else ""
        elif op == "-":
            active[kind].pop(value, None)
    return active


def _starttime(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _same_or_gone(pid: int, start: str) -> bool:
    """Whether killing process group `pid` is safe: its leader is the registered
    process, or gone. The kernel reuses no pid while a group still carries it, so a
    group whose leader is gone is still the registered one."""
    now = _starttime(pid)
    return now is None or now == start


def _umount(path: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(str(path).encode(), _MNT_DETACH)  # EINVAL when not mounted: fine


if __name__ == "__main__":
    sys.exit(main(sys.argv))
