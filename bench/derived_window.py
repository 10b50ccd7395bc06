#!/usr/bin/env python3
"""How well the window derived from the capture bounds the logged one, per stack.

For a sender whose log has no window (a browser, a closed server), join.wire_trace
estimates it from the decrypted capture: the largest bytes in flight within each
smoothed RTT, a lower bound. This runs real transfers of every stack that logs its
window, on a clean link and under random loss, and compares each estimate with the
logged window over the same interval (harness/observe/window_bound.py): how often the
bound held (within one datagram), the worst excess, and how tight it was.

Prints one table row per stack and schedule, and ONE JSON line at the end. Needs root
(namespaces); each run takes a few seconds.

    .venv/bin/python bench/derived_window.py [--stacks aioquic,quinn,...] [--bytes 4000000] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import endpoints  # noqa: E402
from harness.cli import link_schedule  # noqa: E402
from harness.observe import qlog  # noqa: E402
from harness.observe.events import PacketSent  # noqa: E402
from harness.observe.groundtruth import read_log  # noqa: E402
from harness.observe.join import wire_trace  # noqa: E402
from harness.observe.window_bound import compare  # noqa: E402
from harness.observe.wire import read_wire  # noqa: E402
from harness.testbed.topology import EndpointOptions, Testbed, TransferPlan  # noqa: E402

SCHEDULES = {"clean": 0.0, "loss 1%": 0.01}


def one(stack, loss: float, seed: int, size: int, out: Path) -> dict:
    """One transfer's agreement (20 Mbit/s, 40 ms, one-BDP queue)."""
    schedule = link_schedule(20_000_000, 40_000, loss, None, seed)
    with Testbed(schedule, out) as bed:
        result = bed.transfer(stack, TransferPlan(sizes=(size,)), EndpointOptions(timeout_s=60))
    if not result.ok:
        return {"error": result.reason}
    logged = qlog.read_run(out, stack.name)["server"][0]
    start = read_log(out / "link.ndjson").header["start_unix_ns"]
    view = read_wire(out / "pcap" / "server.pcap", [out / "server" / "keys.log"], start)
    conn = Counter(d.conn for d in view.datagrams if d.direction == "s2c").most_common(1)[0][0]
    wire = wire_trace(view, conn, "server", stack.name)
    got = compare(logged, wire, max(e.size or 0 for e in wire.of(PacketSent)))
    return {"samples": got.samples, "above": got.above, "worst_excess": got.worst_excess,
            "ratio_median": round(got.ratio_median, 3), "ratio_p90": round(got.ratio_p90, 3)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--stacks", default="aioquic,picoquic,quic-go,quiche,quinn,tquic")
    p.add_argument("--bytes", type=int, default=4_000_000)
    p.add_argument("--runs", type=int, default=2)
    a = p.parse_args()
    table: dict = {}
    print(f"{'stack':9} {'schedule':8} {'estimates':>9} {'held':>7} {'worst excess B':>14} "
          f"{'median est/log':>14} {'p90':>6}")
    for name in a.stacks.split(","):
        stack = endpoints.load(name)
        for label, loss in SCHEDULES.items():
            runs = []
            for seed in range(1, a.runs + 1):
                with tempfile.TemporaryDirectory(prefix="ll-dw-") as tmp:
                    runs.append(one(stack, loss, seed, a.bytes, Path(tmp)))
                print(f"  {name} {label} seed {seed}: {runs[-1]}", file=sys.stderr, flush=True)
            good = [r for r in runs if "samples" in r]
            n = sum(r["samples"] for r in good)
            above = sum(r["above"] for r in good)
            row = {"runs": len(good), "samples": n, "held": round(1 - above / n, 4) if n else None,
                   "worst_excess": max((r["worst_excess"] for r in good), default=None),
                   "ratio_median": sorted(r["ratio_median"] for r in good)[len(good) // 2] if good else None,
                   "ratio_p90": max((r["ratio_p90"] for r in good), default=None),
                   "errors": [r["error"] for r in runs if "error" in r]}
            table.setdefault(name, {})[label] = row
            held = f"{row['held']:.1%}" if row["held"] is not None else "-"
            print(f"{name:9} {label:8} {n:9} {held:>7} {row['worst_excess']!s:>14} "
                  f"{row['ratio_median']!s:>14} {row['ratio_p90']!s:>6}", flush=True)
    print(json.dumps(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
