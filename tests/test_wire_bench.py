"""bench/wire_bench.py, the command behind BENCHMARKS.md's "Wire view and join"
figures: it makes a transfer (virtual time here: no namespaces), times each step of
reading the decrypted capture and joining it to the ground truth, and prints one
JSON line whose figures come from that run."""

from __future__ import annotations

import json
import subprocess
import sys

from harness.testbed.link import REPO_ROOT

STEPS = ("read_log", "read_wire", "join", "audit + shares", "total")


def test_wire_bench_times_every_step_of_a_real_capture():
    argv = [sys.executable, "bench/wire_bench.py", "--stack", "aioquic", "--mode", "virtual", "--bytes", "1MB",
            "--rate", "10mbit", "--repeat", "2"]
    r = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["quic_packets"] > 500, "1 MB is several hundred packets, every one decrypted"
    steps = out["steps_cpu_s"]
    assert set(steps) == set(STEPS)
    for name in STEPS:  # rounded to ms: a small step may read 0
        assert 0 <= steps[name]["min"] <= steps[name]["median"] <= steps[name]["max"], name
    assert steps["read_wire"]["min"] > 0
    parts = sum(steps[k]["min"] for k in STEPS[:-1])
    assert steps["total"]["max"] >= parts * 0.99, "the total is the steps' sum in each round"
    assert out["decrypt_packets_per_s"] == round(out["quic_packets"] / steps["read_wire"]["min"])
