"""Per-example cost of the Docker backend against the local one (issue 8: ≤ 1.5 s).

Runs the same small transfer N times per backend, alternating, and prints one JSON
line: per backend the median wall time of a whole example (testbed set-up, transfer,
tear-down) and, for Docker, the median container set-up (start both, name their
namespaces, wire the link) and tear-down. Needs root, `make docker-images`.

    nice -n 19 .venv/bin/python bench/docker_bench.py --runs 5 --stack aioquic
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from harness import endpoints
from harness.testbed.docker_backend import DockerTestbed, image_for
from harness.schedule import LinkSettings, Phase, Schedule
from harness.testbed.topology import EndpointOptions, Testbed, TransferPlan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--stack", default="aioquic")
    ap.add_argument("--bytes", type=int, default=200_000)
    args = ap.parse_args()
    stack = endpoints.load(args.stack)
    link = LinkSettings(rate_bps=100_000_000, delay_us=5_000, queue_bytes=500_000)
    schedule = Schedule(seed=1, phases=(Phase(start_us=0, c2s=link, s2c=link),))
    plan, opts = TransferPlan(sizes=(args.bytes,)), EndpointOptions(timeout_s=30)
    wall: dict[str, list[float]] = {"local": [], "docker": []}
    transfer: dict[str, list[float]] = {"local": [], "docker": []}
    setup, teardown = [], []
    with tempfile.TemporaryDirectory(prefix="ll-dbench-") as tmp:
        for i in range(args.runs):
            for name in ("local", "docker"):
                out = Path(tmp) / f"{name}-{i}"
                bed = DockerTestbed(schedule, out, image_for(args.stack)) if name == "docker" else Testbed(schedule, out)
                t0 = time.monotonic()
                with bed:
                    result = bed.transfer(stack, plan, opts)
                wall[name].append(time.monotonic() - t0)
                transfer[name].append(result.wall_s or 0.0)
                if not result.ok:
                    raise SystemExit(f"{name} run {i} failed: {result.reason}")
                if name == "docker":
                    setup.append(bed.timings["setup_s"])
                    teardown.append(bed.timings["teardown_s"])
    med = statistics.median
    print(json.dumps({
        "stack": args.stack, "runs": args.runs, "bytes": args.bytes,
        "example_s": {k: round(med(v), 3) for k, v in wall.items()},
        "client_wall_s": {k: round(med(v), 3) for k, v in transfer.items()},
        "docker_overhead_s": round(med(wall["docker"]) - med(wall["local"]), 3),
        "docker_setup_s": round(med(setup), 3), "docker_teardown_s": round(med(teardown), 3),
    }))


if __name__ == "__main__":
    main()
