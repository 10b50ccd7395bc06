"""`make tlc`: model-checks every model in spec/manifest.json and compares TLC's
counts with the manifest, so that a silent change to the model is noticed.

    python -m harness.model.check [--update]

Exit 0 when every model passes with the recorded counts, 1 on a violation or a
count that differs (the message gives both), 2 when TLC cannot run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from harness.model import tlc

SPEC_DIR = Path(__file__).resolve().parents[2] / "spec"
MANIFEST = SPEC_DIR / "manifest.json"
COUNTED = ("distinct_states", "states_generated", "depth")


def check(update: bool = False, manifest_path: Path = MANIFEST, spec_dir: Path = SPEC_DIR) -> int:
    manifest = json.loads(manifest_path.read_text())
    finder = tlc.find()
    print(f"tlc: TLC {finder.version[0]}.{finder.version[1]} from {finder.jar}")
    failed = False
    for model in manifest["models"]:
        started = time.monotonic()
        result = tlc.run(spec_dir, model["module"], model["config"], tlc=finder)
        took = time.monotonic() - started
        got = {k: getattr(result, k) for k in COUNTED}
        if result.error:
            print(f"tlc: {model['config']}: FAILED: {result.error}\n{result.output[-3000:]}")
            failed = True
            continue
        if update:
            model.update(got)
        diff = {k: (model[k], got[k]) for k in COUNTED if model[k] != got[k]}
        if diff:
            what = ", ".join(f"{k} {want} in the manifest, {have} now" for k, (want, have) in diff.items())
            print(f"tlc: {model['config']}: passes, but {what}; if the change is intended, run "
                  f"`python -m harness.model.check --update` and commit spec/manifest.json")
            failed = True
        else:
            print(f"tlc: {model['config']}: pass, {got['distinct_states']} distinct states, depth {got['depth']}, "
                  f"{took:.1f} s (matches the manifest)")
    if update:
        manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--update", action="store_true", help="write the counts found into spec/manifest.json")
    a = p.parse_args(argv)
    try:
        return check(a.update)
    except tlc.TlcError as e:
        print(f"tlc: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
