#!/usr/bin/env python3
"""CPU time of the wire view and the join (harness/observe/wire.py, join.py) on one
real transfer: the steps a property pays when it reads the decrypted capture.

  read_log        the emulator's ground truth (link.ndjson)
  read_wire       the server's capture decrypted with its key log (packets, frames)
  join            every sent packet joined to its ground-truth fate
  audit + shares  declared losses (the server's qlog) against the join, spurious
                  retransmissions, per-flow shares of the bottleneck

The transfer is made first with `longlook transfer` (real time, root: namespaces;
or --mode virtual) unless --run names the directory of one already made. Each step is timed in this
process's CPU time over --repeat rounds; prints ONE JSON line on stdout (per step:
min, median and max seconds; the capture's QUIC packet count; decryption rate),
progress on stderr.

    .venv/bin/python bench/wire_bench.py                         # 20 MB quic-go, 50 Mbit/s, 40 ms, 1 % loss
    .venv/bin/python bench/wire_bench.py --run runs/q --stack quinn --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.observe.events import PacketLost  # noqa: E402
from harness.observe.groundtruth import read_log  # noqa: E402
from harness.observe.join import audit_losses, flow_shares, join, spurious_retransmissions  # noqa: E402
from harness.observe.qlog import read_run  # noqa: E402
from harness.observe.wire import read_wire  # noqa: E402


def log(msg: str) -> None:
    print(f"[wire-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def make_transfer(a: argparse.Namespace, out: Path) -> None:
    """One real-time transfer into `out` with the benchmark's link."""
    argv = [sys.executable, "-m", "harness.cli", "transfer", "--impl", a.stack, "--bytes", a.bytes,
            "--rate", a.rate, "--rtt", a.rtt, "--loss", str(a.loss), "--seed", "1", "--mode", a.mode, "--out", str(out)]
    log(" ".join(argv[2:]))
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the transfer failed (exit {done.returncode}):\n{done.stdout[-1500:]}{done.stderr[-1500:]}")


def one_round(run: Path, stack: str) -> tuple[dict[str, float], int]:
    """CPU seconds of each step, and the server capture's QUIC packet count."""
    times: dict[str, float] = {}

    def timed(name, fn, *args):
        t0 = time.process_time()
        value = fn(*args)
        times[name] = time.process_time() - t0
        return value

    gt = timed("read_log", read_log, run / "link.ndjson")
    view = timed("read_wire", read_wire, run / "pcap" / "server.pcap", [run / "server" / "keys.log"],
                 gt.header["start_unix_ns"])
    j = timed("join", join, view, gt)
    declared = [e for t in read_run(run, stack)["server"] for e in t.of(PacketLost)]

    def audit_and_shares():
        audit_losses(j, declared)
        spurious_retransmissions(j.packets)
        flow_shares(gt, "s2c", joins=[j])

    timed("audit + shares", audit_and_shares)
    times["total"] = sum(times.values())
    packets = sum(1 for d in view.datagrams for q in d.packets if q.pn is not None)
    return times, packets


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, help="an existing `longlook transfer --out` directory (default: make one)")
    ap.add_argument("--stack", default="quic-go", help="the stack that made the run (default quic-go)")
    ap.add_argument("--bytes", default="20MB")
    ap.add_argument("--rate", default="50mbit")
    ap.add_argument("--rtt", default="40ms")
    ap.add_argument("--loss", type=float, default=0.01)
    ap.add_argument("--mode", choices=("real", "virtual"), default="real",
                    help="make the transfer in real time (default, root) or virtual time (sans-IO stacks)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of every step (default 3)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="wire-bench-") as tmp:
        run = a.run
        if run is None:
            if os.geteuid() != 0 and a.mode == "real":
                ap.error("making the transfer needs root (namespaces); or give --run DIR")
            run = Path(tmp) / "run"
            make_transfer(a, run)
        rounds, packets = [], 0
        for i in range(a.repeat):
            times, packets = one_round(run, a.stack)
            log(f"round {i + 1}/{a.repeat}: " + ", ".join(f"{k} {v:.2f} s" for k, v in times.items()))
            rounds.append(times)
    steps = {k: {"min": round(min(r[k] for r in rounds), 3), "median": round(statistics.median(r[k] for r in rounds), 3),
                 "max": round(max(r[k] for r in rounds), 3)} for k in rounds[0]}
    best_wire = steps["read_wire"]["min"]
    print(json.dumps({"stack": a.stack, "run": str(a.run) if a.run else f"{a.bytes} {a.rate} {a.rtt} loss {a.loss} {a.mode} time",
                      "quic_packets": packets, "steps_cpu_s": steps,
                      "decrypt_packets_per_s": round(packets / best_wire) if best_wire else None,
                      "loadavg": [round(x, 2) for x in os.getloadavg()]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
