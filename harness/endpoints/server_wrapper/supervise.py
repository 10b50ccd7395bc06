"""The part every wrapper around a packaged server shares (caddy, ngtcp2's
gtlsserver): the server dies with its wrapper, the wrapper prints the contract's
`{"ready": true}` once the server is ready, forwards SIGTERM, and maps the server's
end to the contract's exit status (docs/endpoints.md).

Standalone, as the wrappers are: imports nothing from harness/ (they put this
directory on sys.path, as the browsers do with harness/endpoints/browser/page.py).
"""

from __future__ import annotations

import ctypes
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable

#: How often readiness is polled, s.
POLL_S = 0.02


def die_with_parent() -> None:
    """In the server's child before exec: SIGKILL when the wrapper dies (PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def supervise(proc: subprocess.Popen, name: str, ready: Callable[[], bool], ready_timeout_s: float,
              timeout: str | None) -> int:
    """Waits for `ready()` (the server's own sign, or its port bound), prints the
    ready line, then waits for the server to end, at most `timeout` seconds
    (LL_TIMEOUT_S; None: no limit). Returns the contract's status: 0 for an end by
    SIGTERM or a clean exit, 1 when it died early, never got ready or ran out of
    time (killed, with one stderr line saying which), else its own status."""
    signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
    deadline = time.monotonic() + ready_timeout_s
    while not ready():
        if proc.poll() is not None:
            print(f"{name}: exited with {proc.returncode} before it was ready; see its log above", file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            print(f"{name}: not ready after {ready_timeout_s:.0f} s", file=sys.stderr)
            return 1
        time.sleep(POLL_S)
    print(json.dumps({"ready": True}), flush=True)
    try:
        rc = proc.wait(timeout=float(timeout) if timeout else None)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        print(f"{name}: LL_TIMEOUT_S={timeout} reached", file=sys.stderr)
        return 1
    return 0 if rc in (0, -signal.SIGTERM) else rc
