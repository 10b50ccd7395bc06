"""The Rust stacks in virtual time: one binary per stack links the emulator's own
core (the `longlook-link` crate) and runs a client and server over it with a
discrete-event loop of its own (harness/endpoints/rust/):
- `quinn-virtual`: a quinn-proto client and server;
- `quiche-virtual`: quiche-endpoint's own client and server code, with the libc
  clock and getrandom answered by the binary (docs/virtual-time.md, "quiche: a
  clock shim").

Python prepares the run directory as for aioquic (schedule.json, the objects in
www/, a seed-derived certificate), hands the plan to the binary as one JSON object
on stdin, and reads the loop's statistics from its stdout. Everything else in the
run directory (link.ndjson, pcaps, qlogs, key logs, app logs, downloads) is the
binary's.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness.endpoints import ENDPOINTS_DIR, StackError

#: Each stack's binary: the same input, output and run directory (quiche-virtual
#: reuses quinn-virtual's config and link code).
BINARIES = {s: ENDPOINTS_DIR / "rust" / "target" / "release" / f"{s}-virtual" for s in ("quinn", "quiche")}
#: The certificate's name (SAN); the client connects by address, as in real time.
SERVER_NAME = "server.longlook.test"


class RustVirtualError(StackError):
    """The binary is missing, refused its input, or failed outside the transfer
    (a StackError, so the CLI prints the message and its fix, not a traceback)."""


class Unsupported(Exception):
    """An option the stack cannot honour (exit 127); the message says which."""


def built(stack: str) -> bool:
    return BINARIES[stack].exists()


def run(schedule, out: Path, plan, opts, names: list[str], stack: str) -> dict:
    """Runs the transfer with `stack`'s binary; returns the loop's statistics
    (error, virtual_s, steps, link summary, per-host datagram counts)."""
    from harness.virtual.determinism import EPOCH_UNIX_NS, write_cert

    binary = BINARIES[stack]
    if not built(stack):
        raise RustVirtualError(f"{binary} is not built: run `make setup` "
                                "(or harness/endpoints/rust/build.sh)")
    schedule.write(out / "schedule.json")
    write_cert(out / "certs", SERVER_NAME, schedule.seed, plan.cert_padding)
    config = {
        "names": names,
        "testcase": plan.testcase,
        "think_ms": plan.think_ms,
        "cc": opts.cc,
        "max_datagram_size": opts.max_datagram_size,
        "initial_window": opts.initial_window,
        "flow_window": opts.flow_window,
        "timeout_s": opts.timeout_s,
        "seed": (schedule.seed ^ plan.seed) & (2**64 - 1),
        "qlog": opts.qlog,
        "epoch_unix_ns": EPOCH_UNIX_NS,
        "clients": plan.quic_flows,
    }
    proc = subprocess.run([str(binary), str(out)], input=json.dumps(config), capture_output=True, text=True,
                          check=False)
    if proc.returncode == 127:
        raise Unsupported(proc.stderr.strip().removeprefix(f"{binary.name}: unsupported: "))
    if proc.returncode != 0:
        raise RustVirtualError(f"{binary.name} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    # The last line: quiche's server prints its ready line first, as in real time.
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    if stats["error"] and proc.stderr.strip():
        stats["error"] += f" (stderr: {proc.stderr.strip().splitlines()[-1][-300:]})"
    return stats
