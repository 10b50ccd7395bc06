"""Python side of the link emulator ``longlook-link`` (docs/emulator.md).

``Link`` starts the emulator between two namespaces made by
:func:`harness.testbed.netns.namespace_pair`, waits for its ready line, assigns the
addresses and routes, and always stops the process on exit. ``check_schedule``
runs the emulator's strict schedule validator. The ground-truth log the emulator
writes (``log_path``) is read by :mod:`harness.observe.groundtruth`: the testbed
writes runs, it never observes them.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.testbed import lifeline, netns
from harness.schedule import Schedule

__all__ = [
    "Link", "LinkError", "ScheduleError", "LinkBinaryMissing", "check_schedule", "find_binary", "run_in_ns",
]

_SUN_PATH_MAX = 100  # sockaddr_un.sun_path holds 108 bytes; keep a margin
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BINARY = REPO_ROOT / "harness" / "emulator" / "target" / "release" / "longlook-link"


class LinkError(RuntimeError):
    """The emulator failed to start, answer or stop as docs/emulator.md says."""


class LinkBinaryMissing(LinkError):
    """No ``longlook-link`` binary where we looked."""


class ScheduleError(ValueError):
    """``longlook-link check`` rejected a schedule; ``message`` is its explanation."""

    def __init__(self, returncode: int, message: str):
        super().__init__(f"schedule rejected (exit {returncode}): {message}")
        self.returncode = returncode
        self.message = message


def find_binary() -> Path:
    """Return the emulator binary: ``$LONGLOOK_LINK`` or the release build in the repo.

    Raises LinkBinaryMissing with the fix if it does not exist.
    """
    override = os.environ.get("LONGLOOK_LINK")
    path = Path(override) if override else DEFAULT_BINARY
    if not (path.is_file() and os.access(path, os.X_OK)):
        source = "LONGLOOK_LINK" if override else "the default build path"
        raise LinkBinaryMissing(
            f"longlook-link not found at {path} ({source}); run `make setup` to build it"
        )
    return path


def check_schedule(path: str | Path) -> None:
    """Validate the schedule file at ``path`` with ``longlook-link check``.

    Raises ScheduleError carrying the exit code and the emulator's message.
    """
    result = subprocess.run(
        [str(find_binary()), "check", str(path)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise ScheduleError(result.returncode, (result.stderr + result.stdout).strip())


def run_in_ns(ns: str, argv: list[str], **popen_kwargs: Any) -> subprocess.Popen:
    """Start ``argv`` inside namespace ``ns``; ``popen_kwargs`` go to Popen. It dies
    with this process (harness.testbed.lifeline)."""
    return lifeline.popen(["ip", "netns", "exec", ns, *argv], **popen_kwargs)


@dataclass(frozen=True)
class LinkOptions:
    """Optional ``run`` flags; None or False leaves the emulator's default."""

    pcap_dir: Path | None = None
    slice_us: int | None = None
    fifo: bool = False
    mtu: int | None = None
    client_dev: str = "ll0"
    server_dev: str = "ll0"
    #: Each side's address with prefix; each side gets a route to the other's subnet.
    #: The Docker backend gives the interop runner's addresses here (docs/docker.md).
    client_addr: str = netns.CLIENT_ADDR
    server_addr: str = netns.SERVER_ADDR

    def argv(self) -> list[str]:
        """Return the flags for these options."""
        args = ["--client-dev", self.client_dev, "--server-dev", self.server_dev]
        if self.pcap_dir is not None:
            args += ["--pcap-dir", str(self.pcap_dir)]
        if self.slice_us is not None:
            args += ["--slice-us", str(self.slice_us)]
        if self.mtu is not None:
            args += ["--mtu", str(self.mtu)]
        if self.fifo:
            args.append("--fifo")
        return args


class Link:
    """One running emulator between ``client_ns`` and ``server_ns``.

    Use as a context manager; files land in ``workdir``: schedule.json,
    link.ndjson (ground truth), link.stdout, link.stderr.
    """

    READY_TIMEOUT_S = 10.0
    STOP_TIMEOUT_S = 10.0

    def __init__(self, schedule: Schedule | dict | str | Path, client_ns: str, server_ns: str,
                 workdir: str | Path, options: LinkOptions | None = None):
        self.client_ns = client_ns
        self.server_ns = server_ns
        self.workdir = Path(workdir)
        self.options = options or LinkOptions()
        self.schedule_path = self._place_schedule(schedule)
        self.log_path = self.workdir / "link.ndjson"
        self._control_dir: Path | None = None
        self.control_path = self.workdir / "control.sock"
        if len(bytes(self.control_path)) > _SUN_PATH_MAX:
            # Unix socket paths are limited to 108 bytes; a deep workdir gets a short one.
            self._control_dir = Path(tempfile.mkdtemp(prefix="llctl-"))
            lifeline.register("tmpdir", str(self._control_dir))
            self.control_path = self._control_dir / "control.sock"
        self.ready: dict[str, Any] = {}
        self.returncode: int | None = None
        self._proc: subprocess.Popen | None = None

    def _place_schedule(self, schedule: Schedule | dict | str | Path) -> Path:
        """Write a Schedule or dict to workdir/schedule.json; keep a path as given."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if isinstance(schedule, (str, Path)):
            return Path(schedule)
        path = self.workdir / "schedule.json"
        if isinstance(schedule, Schedule):
            return schedule.write(path)
        path.write_text(json.dumps(schedule, indent=2) + "\n")
        return path

    @property
    def pid(self) -> int:
        """The emulator's process id."""
        if self._proc is None:
            raise LinkError("Link is not running; use `with Link(...) as link:`")
        return self._proc.pid

    def argv(self) -> list[str]:
        """Return the full ``longlook-link run`` command line."""
        return [
            str(find_binary()), "run", "--schedule", str(self.schedule_path),
            "--client-netns", self.client_ns, "--server-netns", self.server_ns,
            "--log", str(self.log_path), "--control", str(self.control_path),
            *self.options.argv(),
        ]

    def __enter__(self) -> Link:
        if self.options.pcap_dir is not None:
            Path(self.options.pcap_dir).mkdir(parents=True, exist_ok=True)
        # A socket file left by an earlier run in the same workdir would block the bind.
        self.control_path.unlink(missing_ok=True)
        stdout = (self.workdir / "link.stdout").open("wb")
        stderr = (self.workdir / "link.stderr").open("wb")
        with stdout, stderr:
            # Dies with the runner: nothing else would stop it (harness.testbed.lifeline).
            self._proc = lifeline.popen(self.argv(), stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL)
        try:
            self.ready = self._wait_ready()
            opts = self.options
            client_net, server_net = (str(ipaddress.ip_interface(a).network) for a in (opts.client_addr, opts.server_addr))
            netns.configure_tun(self.client_ns, self.ready["client_dev"], opts.client_addr, server_net)
            netns.configure_tun(self.server_ns, self.ready["server_dev"], opts.server_addr, client_net)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        died_by_itself = self._proc is not None and self._proc.poll() is not None
        self._stop()
        if exc_type is not None:
            return  # the caller's error matters more than how the emulator ended
        if died_by_itself:
            raise LinkError(f"longlook-link exited by itself with code {self.returncode}; "
                            f"stderr: {self._stderr_tail()}")
        if self.returncode != 0:
            # docs/emulator.md: SIGTERM flushes the log and exits 0.
            raise LinkError(f"longlook-link exited with code {self.returncode} after SIGTERM; "
                            f"stderr: {self._stderr_tail()}")

    def _wait_ready(self) -> dict[str, Any]:
        """Wait for the ready JSON line on stdout; raise LinkError on exit or timeout."""
        stdout_path = self.workdir / "link.stdout"
        deadline = time.monotonic() + self.READY_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in stdout_path.read_text(errors="replace").splitlines():
                ready = _parse_ready(line)
                if ready is not None:
                    return ready
            if self._proc.poll() is not None:
                raise LinkError(f"longlook-link exited with code {self._proc.returncode} before "
                                f"ready; argv {self.argv()}; stderr: {self._stderr_tail()}")
            time.sleep(0.01)
        raise LinkError(f"longlook-link not ready after {self.READY_TIMEOUT_S} s; "
                        f"stderr: {self._stderr_tail()}")

    def _stop(self) -> None:
        """SIGTERM, wait for the log flush, SIGKILL if it hangs; always reap."""
        proc = self._proc
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=self.STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            self.returncode = proc.returncode
            lifeline.release(proc)
        if self._control_dir is not None:
            shutil.rmtree(self._control_dir, ignore_errors=True)
            lifeline.unregister("tmpdir", str(self._control_dir))

    def _stderr_tail(self, limit: int = 2000) -> str:
        """Return the end of the emulator's stderr, for error messages."""
        path = self.workdir / "link.stderr"
        text = path.read_text(errors="replace") if path.exists() else ""
        return text[-limit:].strip() or "(empty)"

    def request(self, message: dict[str, Any], timeout_s: float = 5.0) -> dict[str, Any]:
        """Send one JSON request line on the control socket and return the reply."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(self.control_path))
            sock.sendall(json.dumps(message).encode() + b"\n")
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
        if not reply.strip():
            raise LinkError(f"no reply to {message} on {self.control_path}")
        return json.loads(reply)

    def set_phase(self, index: int) -> dict[str, Any]:
        """Switch both directions to phase ``index`` now."""
        return self.request({"cmd": "phase", "index": index})

    def stats(self) -> dict[str, Any]:
        """Return the emulator's counters and lateness histogram."""
        return self.request({"cmd": "stats"})


def _parse_ready(line: str) -> dict[str, Any] | None:
    """Return the ready object if ``line`` is the ready line, else None."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) and value.get("ready") is True else None
