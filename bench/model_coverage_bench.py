"""Model coverage reached with and without guidance, at an equal budget.

Runs properties/test_model_conformance.py on one target with a fixed number of
Hypothesis examples, once with hypothesis.target on new model transitions and once
without (LONGLOOK_MODEL_GUIDANCE=0), for each seed; prints the distinct model
transitions each reached as one JSON line per run. Real transfers: needs root.

    .venv/bin/python bench/model_coverage_bench.py --impl aioquic --cc newreno --examples 12 --seeds 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEST = "properties/test_model_conformance.py::test_run_is_a_behaviour_of_the_model"


def run(impl: str, cc: str, examples: int, seed: int, guided: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="longlook-covbench-") as tmp:
        env = dict(os.environ, LONGLOOK_MODEL_GUIDANCE="1" if guided else "0", LONGLOOK_BENCH_EXAMPLES=str(examples),
                   PYTHONPATH=str(REPO / "bench"))
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "pytest", TEST, "--impl", impl, "--cc", cc, "-p", "bench_profile",
                        "--hypothesis-profile", "bench", f"--hypothesis-seed={seed}", "--artifacts", tmp,
                        "-p", "no:cacheprovider", "-q", "--runxfail"],
                       cwd=REPO, env=env, capture_output=True, text=True, check=False)
        took = time.monotonic() - started
        reached, runs = set(), 0
        for f in Path(tmp, "model-coverage").glob("*.ndjson"):
            for line in f.read_text().splitlines():
                d = json.loads(line)
                runs += 1
                reached |= {tuple(t[:3]) for t in d["transitions"]}
    return {"impl": impl, "cc": cc, "seed": seed, "guided": guided, "examples_validated": runs,
            "transitions": len(reached), "seconds": round(took, 1), "reached": sorted(reached)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--impl", default="aioquic")
    p.add_argument("--cc", default="newreno")
    p.add_argument("--examples", type=int, default=12)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    a = p.parse_args()
    for seed in a.seeds:
        for guided in (False, True):
            r = run(a.impl, a.cc, a.examples, seed, guided)
            print(json.dumps({k: v for k, v in r.items() if k != "reached"}), flush=True)
            print(json.dumps({"reached": r["reached"]}), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
