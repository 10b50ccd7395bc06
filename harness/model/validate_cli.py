"""Validates NDJSON traces against the spec; exits non-zero on the first mismatch.

    python -m harness.model.validate_cli TRACE.ndjson [TRACE…] --impl aioquic --cc newreno [--partial] [--keep DIR]

Exit 0: every trace accepted (or unvalidatable, said why); 1: a trace was rejected
(the report names the event); 2: TLC could not run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.model import tlc, tracefile, validate


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("traces", nargs="+", type=Path)
    p.add_argument("--impl", required=True, help="the stack that wrote the traces")
    p.add_argument("--cc", default="newreno", help="congestion-control family: newreno or cubic")
    p.add_argument("--partial", action="store_true", help="the traces were cut: validate them as prefixes")
    p.add_argument("--keep", type=Path, help="also write the TLA+ files of the last trace here")
    a = p.parse_args(argv)
    try:
        for path in a.traces:
            trace = validate.read_ndjson(path, a.impl, partial=a.partial)
            try:
                verdict = validate.validate(trace, a.cc, keep=a.keep)
            except tracefile.Unvalidatable as e:
                print(f"{path}: not validated: {e}")
                continue
            print(verdict.describe())
            if not verdict.accepted:
                return 1
    except tlc.TlcError as e:
        print(f"validate: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
