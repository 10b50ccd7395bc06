"""Test bench for the emulator's integration tests: a namespace pair plus endpoints.

``lab_session`` is what the ``lab`` fixture runs, kept as a plain context
manager so that a test can check what is left after it exits. Endpoints are
``tests/tools/traffic.py`` subcommands run inside a namespace.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from harness.testbed.link import Link, LinkOptions, run_in_ns
from harness.testbed.netns import namespace_pair
from harness.schedule import Schedule

TRAFFIC = Path(__file__).parent / "tools" / "traffic.py"
CLIENT_IP = "198.18.0.1"
SERVER_IP = "198.19.0.1"


class EndpointError(AssertionError):
    """An endpoint failed; the message carries its command and stderr."""


class Lab:
    """A client and a server namespace, a work directory and the endpoints started in them."""

    def __init__(self, client: str, server: str, workdir: Path):
        self.client = client
        self.server = server
        self.workdir = workdir
        self._procs: list[subprocess.Popen] = []
        self._runs = 0

    def link(self, schedule: Schedule | dict, options: LinkOptions | None = None) -> Link:
        """Return a Link (use with `with`) logging into a fresh subdirectory."""
        self._runs += 1
        return Link(schedule, self.client, self.server, self.workdir / f"run{self._runs}", options)

    def _spawn(self, ns: str, args: list[str]) -> subprocess.Popen:
        proc = run_in_ns(ns, [sys.executable, str(TRAFFIC), *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        self._procs.append(proc)
        return proc

    def start_server(self, args: list[str], timeout_s: float = 10.0) -> subprocess.Popen:
        """Start a traffic.py receiver in the server namespace; return once it is bound."""
        proc = self._spawn(self.server, args)
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout_s):
                proc.kill()
                raise EndpointError(f"server {args} not ready after {timeout_s} s")
        line = proc.stdout.readline().strip()
        if line != "ready":
            proc.wait(timeout=timeout_s)
            raise EndpointError(f"server {args} said {line!r}; stderr: {proc.stderr.read()}")
        return proc

    def run_client(self, args: list[str], timeout_s: float = 60.0) -> str:
        """Run a traffic.py sender in the client namespace to completion; return stdout."""
        return self.finish(self._spawn(self.client, args), timeout_s)

    @staticmethod
    def finish(proc: subprocess.Popen, timeout_s: float = 30.0) -> str:
        """Wait for an endpoint; return its stdout or raise EndpointError."""
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise EndpointError(f"{proc.args} timed out after {timeout_s} s; stderr: {err}")
        if proc.returncode != 0:
            raise EndpointError(f"{proc.args} exited {proc.returncode}; stderr: {err}")
        return out

    def close(self) -> None:
        """Kill endpoints still running (a failed test), and reap them."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@contextlib.contextmanager
def lab_session(workdir: Path) -> Iterator[Lab]:
    """Create the namespace pair and a Lab; always kill endpoints and remove the pair."""
    with namespace_pair() as (client, server):
        lab = Lab(client, server, workdir)
        try:
            yield lab
        finally:
            lab.close()


def read_json(path: Path) -> dict:
    """Load a JSON file written by an endpoint."""
    return json.loads(Path(path).read_text())
