"""Chaos benchmark (issue 22, "Nothing outlives its runner"): a real runner doing a
real transfer is SIGKILLed at a random moment, 100 times; counts the kills that left
any process, namespace, TUN device, container or temporary directory one second
later, and times how long after the kill nothing was left.

    .venv/bin/python bench/chaos_kill.py [--runs 100] [--impl aioquic] [--seed N] [--lifeline off]

Runners take turns: `longlook transfer`, a Testbed script with a competing TCP flow,
and pytest running a test that transfers (tests/chaos.py, shared with
tests/test_chaos_kill.py); kill moments are stratified over each runner's life
(start-up to teardown). `--lifeline off` shows
what a kill left before harness/testbed/lifeline.py. Prints one JSON line on stdout;
progress goes to stderr. Needs root and `make setup`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # runnable as a plain script
sys.path.insert(0, str(ROOT / "tests"))  # the chaos driver is the test's

import chaos  # noqa: E402
from harness import endpoints  # noqa: E402
from harness.testbed import netns  # noqa: E402
from harness.testbed.link import find_binary  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--impl", default="aioquic")
    p.add_argument("--seed", type=int, default=None, help="kill moments (default: random, printed)")
    p.add_argument("--lifeline", choices=("on", "off"), default="on")
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("chaos_kill: needs root (namespaces)")
    find_binary()
    if not endpoints.load(a.impl).is_built():
        sys.exit(f"chaos_kill: {a.impl} is not built; run `make setup`")
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    netns.sweep_stale()
    kills = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="longlook-chaos-") as work, chaos.subreaper():
        for i, delay in enumerate(chaos.random_delays(a.runs, random.Random(seed))):
            kill = chaos.kill_once(Path(work) / f"kill-{i}", chaos.mode_of(i), a.impl, delay,
                                   env=chaos.lifeline_env(a.lifeline == "on"))
            kills.append(kill)
            clean = "never" if kill.clean_s is None else f"{kill.clean_s:.3f} s"
            left = f"; left at 1 s: {kill.left_at_bar}" if kill.left_at_bar else ""
            left += f"; other descendants at 1 s: {kill.others_at_bar}" if kill.others_at_bar else ""
            print(f"[chaos {i + 1}/{a.runs}] {kill.mode} killed at {delay:.2f} s ({kill.phase}): "
                  f"clean after {clean}{left}", file=sys.stderr, flush=True)
    cleaned = sorted(k.clean_s for k in kills if k.clean_s is not None)
    dirty = [k for k in kills if k.left_at_bar]
    result = {
        "bench": "chaos_kill",
        "command": " ".join([".venv/bin/python", "bench/chaos_kill.py", *sys.argv[1:]]),
        "runs": a.runs, "impl": a.impl, "seed": seed, "lifeline": a.lifeline,
        "left_anything_after_1s": len(dirty),
        "never_clean_within_2s": sum(k.clean_s is None for k in kills),
        # The runner's descendants outside the testbed (tshark, editcap of the
        # observation stage) carry no parent-death signal: reported, not counted above.
        "other_descendants_after_1s": sum(bool(k.others_at_bar) for k in kills),
        "clean_s": _summary(cleaned),
        # The kills that had something to clean up: namespaces made, not yet removed.
        "clean_s_killed_with_namespaces": _summary(sorted(k.clean_s for k in kills if k.clean_s is not None
                                                          and k.phase in ("namespaces", "link", "endpoints"))),
        "what_was_left": dict(collections.Counter(item.split()[0] for k in dirty for item in k.left_at_bar)),
        "phases": dict(collections.Counter(k.phase for k in kills)),
        "modes": dict(collections.Counter(k.mode for k in kills)),
        "wall_s": round(time.monotonic() - t0, 1),
    }
    print(json.dumps(result))
    return 0


def _summary(values: list[float]) -> dict:
    if not values:
        return {}
    return {"n": len(values), "median": round(statistics.median(values), 3),
            "p95": round(values[min(len(values) - 1, int(0.95 * len(values)))], 3), "max": round(values[-1], 3)}


if __name__ == "__main__":
    sys.exit(main())
