"""Model coverage reached by free, guided and directed generation, at an equal budget.

Runs properties/test_model_conformance.py on one target with a fixed number of
Hypothesis examples, once per arm and seed, and prints the distinct observable model
transitions each reached as one JSON line per run. The arms:
  free      free schedules only, no guidance (LONGLOOK_DIRECTED=0, LONGLOOK_MODEL_GUIDANCE=0)
  guided    free schedules, hypothesis.target on new transitions (LONGLOOK_DIRECTED=0)
  directed  free and directed schedules (TLC's paths placed from estimates,
            harness/schedule/directed.py), guided (LONGLOOK_DIRECTED=open)
  steered   free and steered schedules (an earlier run's schedule with one impairment
            where its trace shows the state, harness/model/steer.py; directed ones
            before there is a run), guided: the default
  only-directed  steered and directed schedules only, guided
Real transfers need root; --mode virtual runs in virtual time.

    .venv/bin/python bench/model_coverage_bench.py --impl aioquic --cc newreno --examples 12 --seeds 1 2
    .venv/bin/python bench/model_coverage_bench.py --mode virtual --arms guided directed steered --examples 20 --seeds 1 2 3
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


ARMS = {"free": {"LONGLOOK_DIRECTED": "0", "LONGLOOK_MODEL_GUIDANCE": "0"},
        "guided": {"LONGLOOK_DIRECTED": "0", "LONGLOOK_MODEL_GUIDANCE": "1"},
        "directed": {"LONGLOOK_DIRECTED": "open", "LONGLOOK_MODEL_GUIDANCE": "1"},
        "steered": {"LONGLOOK_DIRECTED": "1", "LONGLOOK_MODEL_GUIDANCE": "1"},
        "steered-unguided": {"LONGLOOK_DIRECTED": "1", "LONGLOOK_MODEL_GUIDANCE": "0"},
        "only-directed": {"LONGLOOK_DIRECTED": "only", "LONGLOOK_MODEL_GUIDANCE": "1"}}


def run(impl: str, cc: str, examples: int, seed: int, arm: str, mode: str) -> dict:
    from harness.model.coverage import load, model_transitions

    with tempfile.TemporaryDirectory(prefix="longlook-covbench-") as tmp:
        env = dict(os.environ, **ARMS[arm], LONGLOOK_BENCH_EXAMPLES=str(examples), PYTHONPATH=str(REPO / "bench"))
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "pytest", TEST, "--impl", impl, "--cc", cc, "--mode", mode,
                        "-p", "bench_profile",
                        "--hypothesis-profile", "bench", f"--hypothesis-seed={seed}", "--artifacts", tmp,
                        "-p", "no:cacheprovider", "-q", "--runxfail"],
                       cwd=REPO, env=env, capture_output=True, text=True, check=False)
        took = time.monotonic() - started
        # The target's own universe: what it can show (harness/model/coverage.py, per target).
        targets = load([Path(tmp, "model-coverage")]) if Path(tmp, "model-coverage").is_dir() else {}
        lines = [json.loads(x) for f in Path(tmp, "model-coverage").glob("*.ndjson") for x in f.read_text().splitlines()] \
            if Path(tmp, "model-coverage").is_dir() else []
    # Each steered run: the transition it was steered at, and whether it took it.
    aims = [[*x["steered"], any(t[:3] == x["steered"] for t in x["transitions"])] for x in lines if x.get("steered")]
    cov = next(iter(targets.values()), None)
    runs = cov.runs if cov else 0
    reached = set(cov.reached) if cov else set()
    obs = {t for t in model_transitions() if (cov.observable(t) if cov else False)}
    return {"impl": impl, "cc": cc, "mode": mode, "seed": seed, "arm": arm, "examples_validated": runs,
            "steered_runs": len(aims), "steered_hits": sum(1 for a in aims if a[-1]), "aims": aims,
            "observable_reached": len(reached & obs), "observable": len(obs), "seconds": round(took, 1),
            "reached": sorted(reached)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--impl", default="aioquic")
    p.add_argument("--cc", default="newreno")
    p.add_argument("--examples", type=int, default=12)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    p.add_argument("--mode", choices=("real", "virtual"), default="real")
    a = p.parse_args()
    sys.path.insert(0, str(REPO))
    for seed in a.seeds:
        for arm in a.arms:
            r = run(a.impl, a.cc, a.examples, seed, arm, a.mode)
            print(json.dumps({k: v for k, v in r.items() if k not in ("reached", "aims")}), flush=True)
            print(json.dumps({"reached": r["reached"], "aims": r["aims"]}), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
