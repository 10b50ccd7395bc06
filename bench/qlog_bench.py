#!/usr/bin/env python3
"""Parse speed of the qlog readers (harness/observe/qlog.py), in events per second.

Builds large qlog files from the real fixtures in tests/fixtures/qlog (their events
repeated with shifted times and packet numbers, so the dialects see realistic
traffic) and times, per format, two layers:

  raw    read_raw as read_traces calls it: bytes → event dicts (the target: ≥ 500k
         events/s); JSON-SEQ events pruned to the keys the dialects read, where the
         revision has that (`raw_full`: without pruning, as the conformance checks read)
  trace  read_traces: raw + the stack's dialect → a normalised Trace

Prints ONE JSON line on stdout ({"<stack>": {"events": N, "raw_eps": …,
"raw_eps_cpu": …, "trace_eps": …, "trace_eps_cpu": …}, …}, plus the load average);
progress goes to stderr. Best of --repeat runs; `_eps` from wall-clock time,
`_eps_cpu` from the process's CPU time.

`--baseline REV` also times the readers as they were at git revision REV (exported
to a temporary directory, run in a child process on the same generated files), so
before and after come from one run on one host load; they appear under "baseline".

    .venv/bin/python bench/qlog_bench.py [--events 1000000] [--repeat 3] [--baseline REV]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The code under test: this checkout, or (in the --baseline child) an exported revision.
CODE = Path(os.environ.get("QLOG_BENCH_CODE", ROOT))
sys.path.insert(0, str(CODE))

from harness.observe import qlog  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "qlog"
#: stack → fixture run whose server qlog is the template (one per serialisation).
TEMPLATES = {"quic-go": "quic-go/newreno", "aioquic": "aioquic/newreno", "picoquic": "picoquic/newreno"}


def _shift(data: dict, k: int, stride: int) -> dict:
    """A copy of an event's data with packet numbers moved up by k·stride."""
    d = json.loads(json.dumps(data))
    hdr = d.get("header") if isinstance(d.get("header"), dict) else d
    if isinstance(hdr.get("packet_number"), int):
        hdr["packet_number"] += k * stride
    for f in d.get("frames") or ():
        if f.get("frame_type") == "ack":
            f["acked_ranges"] = [[r[0] + k * stride, r[-1] + k * stride] for r in f.get("acked_ranges", [])]
    return d


def _repeat_events(events: list, n: int, time_of, with_time, span: float) -> list:
    stride = 1 + max((_pn(e) for e in events), default=0)
    out, k = [], 0
    while len(out) < n:
        out += [with_time(e, time_of(e) + k * span, k, stride) for e in events]
        k += 1
    return out[:n]


def _pn(e) -> int:
    d = e[3] if isinstance(e, list) else e.get("data", {})
    hdr = d.get("header") if isinstance(d.get("header"), dict) else d
    pn = hdr.get("packet_number")
    return pn if isinstance(pn, int) and pn < 1 << 20 else 0


def make_seq(src: Path, dst: Path, n: int) -> int:
    recs = [json.loads(r) for r in src.read_bytes().split(b"\x1e") if r.strip()]
    header, events = recs[0], recs[1:]
    span = events[-1]["time"] + 1

    def with_time(e, t, k, stride):
        return {**e, "time": t, "data": _shift(e.get("data", {}), k, stride)}

    out = _repeat_events(events, n, lambda e: e["time"], with_time, span)
    with open(dst, "wb") as f:
        for rec in [header] + out:
            f.write(b"\x1e" + json.dumps(rec, separators=(",", ":")).encode() + b"\n")
    return len(out)


def make_doc(src: Path, dst: Path, n: int) -> int:
    doc = json.loads(src.read_text())
    trace = doc["traces"][0]
    events = trace["events"]
    if trace.get("event_fields"):  # draft-00 arrays: [time, category, event, data]
        span = events[-1][0] + 1
        out = _repeat_events(events, n, lambda e: e[0],
                             lambda e, t, k, s: [t, e[1], e[2], _shift(e[3], k, s)], span)
    else:
        span = events[-1]["time"] - events[0]["time"] + 1
        out = _repeat_events(events, n, lambda e: e["time"],
                             lambda e, t, k, s: {**e, "time": t, "data": _shift(e.get("data", {}), k, s)}, span)
    trace["events"] = out
    dst.write_text(json.dumps(doc))
    return len(out)


def best_of(repeat: int, fn) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds of `repeat` calls (CPU time is what a
    shared, busy machine still measures fairly)."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu


def generate(stack: str, n: int, tmp: Path) -> tuple[Path, int]:
    """A file of about `n` events built from `stack`'s template fixture."""
    run = FIXTURES / TEMPLATES[stack]
    src = next((run / "server" / "qlog").glob("*"))
    dst = tmp / f"{stack}{src.suffix}"
    maker = make_seq if src.read_bytes()[:1] == b"\x1e" else make_doc
    count = maker(src, dst, n)
    print(f"[qlog_bench] {stack}: {count} events, {dst.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    return dst, count


def bench(stack: str, dst: Path, count: int, repeat: int) -> dict:
    """Events/s of read_raw and read_traces on the generated file `dst`."""
    run = FIXTURES / TEMPLATES[stack]
    start = qlog.read_link_start(run / "link.ndjson")
    out: dict = {"events": count, "mb": round(dst.stat().st_size / 1e6, 1)}
    if "prune" in inspect.signature(qlog.read_raw).parameters:
        full_w, full_c = best_of(repeat, lambda: qlog.read_raw(dst))
        out.update(raw_full_eps=round(count / full_w), raw_full_eps_cpu=round(count / full_c))
        raw_w, raw_c = best_of(repeat, lambda: qlog.read_raw(dst, prune=True))
    else:
        raw_w, raw_c = best_of(repeat, lambda: qlog.read_raw(dst))
    applog, link = run / "server" / "app.ndjson", run / "link.ndjson"
    trace_w, trace_c = best_of(repeat, lambda: qlog.read_traces(dst, stack, "server", start, applog, link))
    return {**out, "raw_eps": round(count / raw_w), "raw_eps_cpu": round(count / raw_c),
            "trace_eps": round(count / trace_w), "trace_eps_cpu": round(count / trace_c)}


def baseline(rev: str, files: dict[str, tuple[Path, int]], repeat: int, tmp: Path) -> dict:
    """The same measurement with harness/ as of git revision `rev`, in a child process."""
    code = tmp / "baseline"
    code.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "harness"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
    spec = json.dumps({s: [str(p), n] for s, (p, n) in files.items()})
    out = subprocess.run([sys.executable, __file__, "--repeat", str(repeat), "--files", spec],
                         env={**os.environ, "QLOG_BENCH_CODE": str(code)}, check=True,
                         capture_output=True, text=True).stdout
    return {"rev": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], check=True,
                                  capture_output=True, text=True).stdout.strip(), **json.loads(out)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=1_000_000, help="events per generated file")
    p.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    p.add_argument("--only", choices=sorted(TEMPLATES), action="append", help="stack(s) to run")
    p.add_argument("--baseline", metavar="REV", help="also time the readers of this git revision")
    p.add_argument("--files", help=argparse.SUPPRESS)  # the --baseline child: {stack: [path, events]}
    a = p.parse_args()
    if a.files:
        files = {s: (Path(f), n) for s, (f, n) in json.loads(a.files).items()}
        print(json.dumps({s: bench(s, f, n, a.repeat) for s, (f, n) in files.items()}))
        return
    with tempfile.TemporaryDirectory(prefix="qlog-bench-") as tmp:
        files = {s: generate(s, a.events, Path(tmp)) for s in (a.only or sorted(TEMPLATES))}
        result: dict = {}
        if a.baseline:
            result["baseline"] = baseline(a.baseline, files, a.repeat, Path(tmp))
        result.update({s: bench(s, f, n, a.repeat) for s, (f, n) in files.items()})
    result["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
