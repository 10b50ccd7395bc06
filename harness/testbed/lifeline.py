"""Nothing a run starts outlives its runner (issue 22).

A runner (pytest, `longlook transfer`, a benchmark) killed with SIGKILL runs no
cleanup of its own. Two mechanisms make its processes, namespaces, TUN devices,
containers and temporary directories go anyway, within a fraction of a second:

- **Parent-death signal.** Every process the testbed starts goes through
  :func:`argv`, which prefixes it with a tiny wrapper that sets
  ``PR_SET_PDEATHSIG = SIGKILL`` and then execs the real command. The setting
  survives ``execve`` (``ip netns exec`` execs the endpoint without forking, and
  every endpoint's ``run`` script execs its program), so the kernel itself kills
  the endpoint, the link emulator, a competitor or a helper the moment the runner
  dies: no daemon is needed for them. Why a wrapper and not ``preexec_fn``:
  ``preexec_fn`` is unsafe in a threaded parent (the child may deadlock before
  exec) and forces the slow fork path; the wrapper is one exec more (~10 ms) and
  checks, after setting the signal, that its parent is still the runner, which
  closes the window in which the runner dies between fork and prctl (the signal
  would then never come). ``setpriv --pdeathsig`` has no such check. The kernel
  sends the signal when the *thread* that forked the process ends: every runner
  here drives its testbed from its main thread; one that used a short-lived
  worker thread would see its processes killed when that thread ends.
- **The reaper.** The parent-death signal reaches direct children only, and
  namespaces, containers and directories are no processes. So the first time a
  runner registers something (:func:`register`) it starts ``reaper.py``: a
  detached process in its own session that holds a pidfd on the runner. The
  runner appends what it creates to a registry file in the reaper's run
  directory, and what it removes again. When the runner dies the reaper kills the
  registered process groups and every process inside the registered namespaces,
  deletes the namespaces (their TUN devices go with the emulator that holds
  them), removes the containers and temporary directories, removes its run
  directory and exits. At a normal exit the runner says goodbye through a pipe,
  the reaper finds nothing left and exits, and the runner reaps it (no zombie,
  even where init does not reap orphans).

Why not a cgroup the runner owns: cgroup v2 is not delegated everywhere (hosts
with a hybrid hierarchy mount it elsewhere, containers often see it read-only,
and the rootless mode of issue 22 would need a delegated subtree), and a cgroup
still needs someone alive to write ``cgroup.kill`` after the runner is gone.
Every process of a run is either a direct child (parent-death signal), in a
registered process group, or inside one of the run's namespaces (an endpoint's
own children); the reaper finds all three without cgroups.

The reaper only ever deletes namespaces named for its own runner
(``ll-<runner pid>-…``, harness.testbed.netns), so it never touches another live
runner's. :func:`harness.testbed.netns.sweep_stale` stays as the backstop for a
reaper killed with its runner (a whole process tree or cgroup killed at once).

``LONGLOOK_LIFELINE=off`` turns both off: a killed run then leaves everything for
the next run's sweep, as before (to inspect a killed run's leftovers, and in the
sweep's own test).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV = "LONGLOOK_LIFELINE"
REAPER = Path(__file__).with_name("reaper.py")
#: What the registry holds (reaper.py reads the same names).
KINDS = ("pgid", "pid", "netns", "container", "tmpdir")
#: How long a normally ending runner waits for its reaper's last check, s.
GOODBYE_TIMEOUT_S = 10.0

# Runs as `python -I -S -c _WRAPPER <runner pid> argv...`: isolated and without
# site-packages, so it starts in ~10 ms and nothing in the environment changes it.
# Python ignores SIGPIPE and SIGXFSZ at start-up and an ignored signal stays
# ignored across exec, so both are restored first: the command must see the
# dispositions subprocess gives it (restore_signals). Exit 255 on a failed exec is
# what `ip netns exec` itself exits with, never the contract's 127 (unsupported).
_WRAPPER = """\
import ctypes, os, signal, sys
for s in (signal.SIGPIPE, signal.SIGXFSZ):
    signal.signal(s, signal.SIG_DFL)
if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0) != 0:
    sys.stderr.write("longlook lifeline: prctl(PR_SET_PDEATHSIG) failed\\n")
    os._exit(255)
if os.getppid() != int(sys.argv[1]):
    sys.stderr.write("longlook lifeline: the runner ended before this command started\\n")
    os._exit(255)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as e:
    sys.stderr.write(f"longlook lifeline: exec of {sys.argv[2]!r} failed: {e}\\n")
    os._exit(255)
"""


def enabled() -> bool:
    """False when $LONGLOOK_LIFELINE is off, 0 or no."""
    return os.environ.get(ENV, "on").strip().lower() not in ("off", "0", "no", "false")


def argv(command: list[str], env: dict[str, str] | None = None, cwd: str | Path | None = None) -> list[str]:
    """`command` prefixed so that it dies with this process (SIGKILL when it exits).

    Raises FileNotFoundError when the program cannot be found, as Popen would: the
    wrapper would otherwise turn a missing program into an exit status."""
    command = [os.fspath(c) for c in command]
    if not enabled():
        return command
    program = command[0]
    if os.sep in program:
        found = os.path.join(os.fspath(cwd), program) if cwd is not None else program
        ok = os.access(found, os.X_OK) and not os.path.isdir(found)
    else:
        ok = shutil.which(program, path=os.pathsep.join(os.get_exec_path(env))) is not None
    if not ok:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    return [sys.executable, "-I", "-S", "-c", _WRAPPER, str(os.getpid()), *command]


def popen(command: list[str], **kwargs: Any) -> subprocess.Popen:
    """subprocess.Popen(`command`, **kwargs) that dies with this process, and whose
    process group (with start_new_session / process_group=0) or pid is registered
    with the reaper; :func:`release` it once it is stopped and reaped."""
    proc = subprocess.Popen(argv(command, kwargs.get("env"), kwargs.get("cwd")), **kwargs)
    if enabled():
        leads = kwargs.get("start_new_session") or kwargs.get("process_group") == 0
        start = _starttime(proc.pid)
        if start is not None:
            register("pgid" if leads else "pid", str(proc.pid), start)
    return proc


def release(proc: subprocess.Popen) -> None:
    """Forgets a process :func:`popen` registered, once it has been reaped."""
    for kind in ("pgid", "pid"):
        unregister(kind, str(proc.pid))


def register(kind: str, value: str, extra: str = "") -> None:
    """Tells the reaper about something to remove if this process dies first.

    Register before creating (a name that never came to exist costs nothing),
    so that no kill between the creation and the registration escapes."""
    line = _ensure()
    if line is not None:
        line.write("+", kind, value, extra)


def unregister(kind: str, value: str) -> None:
    """Tells the reaper `value` was removed normally; no reaper is started for it."""
    if _line is not None and _line.pid == os.getpid():
        _line.write("-", kind, value, "")


@dataclass
class _Line:
    """This process's reaper: its run directory, registry and goodbye pipe."""

    pid: int
    rundir: Path
    registry_fd: int
    goodbye_fd: int
    reaper: subprocess.Popen

    def write(self, op: str, kind: str, value: str, extra: str) -> None:
        if kind not in KINDS or any(c.isspace() for c in value):
            raise ValueError(f"lifeline: cannot register {kind} {value!r}")
        # One O_APPEND write per line: lines never interleave, and a kill cannot
        # leave half a line of this size.
        os.write(self.registry_fd, f"{op} {kind} {value} {extra}".rstrip().encode() + b"\n")


_line: _Line | None = None


def _ensure() -> _Line | None:
    """This process's reaper, started on first use (a forked child gets its own)."""
    global _line
    if not enabled():
        return None
    if _line is not None and _line.pid == os.getpid():
        return _line
    pid = os.getpid()
    start = _starttime(pid)
    rundir = Path(tempfile.mkdtemp(prefix=f"longlook-lifeline-{pid}-"))
    registry_fd = os.open(rundir / "registry", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    goodbye_r, goodbye_w = os.pipe()  # both close-on-exec; pass_fds opens the read end to the reaper only
    try:
        # Its own session: Ctrl-C in the terminal and a kill of the runner's
        # process group leave it alone. No stdout/stderr of the runner's: a parent
        # reading the runner's pipes to EOF must not wait for the reaper.
        reaper = subprocess.Popen(
            [sys.executable, "-I", "-S", str(REAPER), str(pid), str(start), str(rundir), str(goodbye_r)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd="/", start_new_session=True, pass_fds=(goodbye_r,),
        )
    finally:
        os.close(goodbye_r)
    _line = _Line(pid, rundir, registry_fd, goodbye_w, reaper)
    atexit.register(_goodbye)
    return _line


def _goodbye() -> None:
    """At a normal exit: the reaper checks once more (normally finds nothing), removes
    its run directory and exits, and this process reaps it."""
    line = _line
    if line is None or line.pid != os.getpid():
        return  # a forked child inherited the handler; the reaper is its parent's
    with contextlib.suppress(OSError):
        os.write(line.goodbye_fd, b"bye\n")
    with contextlib.suppress(subprocess.TimeoutExpired):
        line.reaper.wait(timeout=GOODBYE_TIMEOUT_S)


def reaper_pid() -> int | None:
    """The pid of this process's reaper, if one was started (tests, diagnostics)."""
    return _line.reaper.pid if _line is not None and _line.pid == os.getpid() else None


def _starttime(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks): a pid plus its
    start time names one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]
