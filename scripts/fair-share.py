#!/usr/bin/env python3
"""Prints a stack's share of Kakhki's bottleneck against n kernel TCP CUBIC flows,
run by run, as a multiple of its fair share: how far a controller sits from the
fairness property's ×1.5 bound (a passing property prints nothing of this).

    scripts/fair-share.py --impl aioquic --cc cubic --flows 1 --runs 8

Each run is one transfer of properties/test_fairness.py's plan (`against_tcp`: its size and time bound, after the
TCP flows have started) on the same link; the last line gives the sorted ratios and
how many exceed the bound. Needs root, like every property run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts._venv import use_checkout_venv  # noqa: E402

use_checkout_venv(__file__)

from harness.endpoints import StackError  # noqa: E402
from harness.run import Target  # noqa: E402
from harness.verdict.runner import Runner  # noqa: E402
from harness.testbed.topology import require_namespaces  # noqa: E402
from harness.verdict import analysis  # noqa: E402
from properties.test_fairness import KAKHKI, SHARE_BOUND, against_tcp  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", default="aioquic", help="stack (default aioquic)")
    ap.add_argument("--cc", default=None, help="its congestion controller (default: the stack's)")
    ap.add_argument("--flows", type=int, default=1, help="competing TCP CUBIC flows (default 1)")
    ap.add_argument("--runs", type=int, default=8, help="transfers (default 8)")
    ap.add_argument("--artifacts", type=Path, default=Path("artifacts/fair-share"),
                    help="where each run's artifacts are kept (default artifacts/fair-share)")
    a = ap.parse_args()
    if a.flows < 1 or a.runs < 1:
        ap.error(f"--flows {a.flows} --runs {a.runs}: both must be at least 1")
    try:
        target = Target.parse(a.impl, a.cc)
    except StackError as e:
        ap.error(f"--impl {a.impl}" + (f" --cc {a.cc}" if a.cc else "") + f": {e}")
    require_namespaces()
    fair = 1 / (a.flows + 1)
    runner = Runner(a.artifacts, keep_passing=True)
    ratios = []
    for rep in range(a.runs):
        plan, timeout_s = against_tcp(KAKHKI, a.flows, rep)
        with runner.run(target, KAKHKI, plan, timeout_s=timeout_s) as obs:
            if not obs.result.ok:
                print(f"run {rep + 1}/{a.runs}: transfer failed: {obs.result.reason} ({obs.out_dir})")
                continue
            share, t0, t1 = obs.transfer_share()
            ratios.append(share / fair)
            busy = obs.result.saturated()
            note = f"; inconclusive: {busy}" if busy else ""
            print(f"run {rep + 1}/{a.runs}: ×{share / fair:.2f} its fair share "
                  f"({share:.0%} from t={t0 / 1e6:.1f} s to {t1 / 1e6:.1f} s){note}", flush=True)
    over = sum(r > SHARE_BOUND for r in ratios)
    listing = ", ".join(f"{r:.2f}" for r in sorted(ratios))
    print(f"{target.id} against {a.flows} TCP CUBIC flow(s): ×[{listing}]; {over} of {len(ratios)} above ×{SHARE_BOUND}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
