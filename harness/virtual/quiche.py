"""quiche in virtual time: the Rust binary `quiche-virtual` (harness/endpoints/rust/
quiche-virtual) runs quiche-endpoint's own client and server code over the
emulator's core, with the libc clock and getrandom answered by the binary itself
(docs/virtual-time.md, "quiche: a clock shim"). Input, output and run directory
are quinn-virtual's, so the runner is harness/virtual/quinn.py's.
"""

from __future__ import annotations

from pathlib import Path

from harness.virtual import quinn as _rust

BINARY = _rust.BINARIES["quiche"]
Unsupported = _rust.Unsupported


def built() -> bool:
    return _rust.built("quiche")


def run(schedule, out: Path, plan, opts, names: list[str]) -> dict:
    return _rust.run(schedule, out, plan, opts, names, stack="quiche")
