"""The `longlook versions` command: its arguments, the sweep over releases, and
what it prints and writes (OUT/versions.md, OUT/versions.json)."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict
from pathlib import Path

from harness.versions import DESCRIBE, compare, sweep

#: A line of pytest -q's progress: one letter per case, then the percentage.
PYTEST_PROGRESS = re.compile(r"^[.FsxXEN]+\s+\[\s*\d+%\]$")


def add_parser(sub) -> None:
    p = sub.add_parser("versions", help="run the properties and reference schedules on each release of a stack "
                                        "and print what changed between consecutive releases (docs/versions.md)")
    p.add_argument("stack", help="the stack (releases: aioquic from PyPI, quic-go from the Go module proxy, quinn and quiche from crates.io)")
    p.add_argument("--from", dest="first", required=True, metavar="A", help="the oldest release, e.g. 1.0.0")
    p.add_argument("--to", dest="last", required=True, metavar="B", help="the newest release, e.g. 1.7.2")
    p.add_argument("--cc", help="the controller (default: the stack's default, where each release has it)")
    p.add_argument("--quick", action="store_true",
                   help="fewer runs, no statistical properties, no real-time re-check: minutes per release")
    p.add_argument("--runs", type=int, help="runs per reference schedule (default 5; --quick 4)")
    p.add_argument("--select", metavar="EXPR",
                   help="only the properties whose names match this pytest -k expression, e.g. 'slow_start or pto'")
    p.add_argument("--jobs", type=int, default=2, metavar="N",
                   help="run each release's properties in N processes (pytest-xdist; default 2, 1 for one)")
    p.add_argument("--mode", choices=("virtual", "real"), default="virtual",
                   help="virtual time (the default, where the stack runs in it) or real time")
    p.add_argument("--minors", action="store_true",
                   help="only the newest release of each minor version from A to B (its latest patch)")
    p.add_argument("--out", type=Path, required=True,
                   help="the directory for every release's results (give the same one to resume)")


def run(a: argparse.Namespace, progress) -> int:
    """Raises StackError / UnitError for bad input (main prints them as one line)."""
    from harness import virtual
    from harness.endpoints import load, releases
    from harness.schedule.units import UnitError

    if a.runs is not None and a.runs < 1:
        raise UnitError(f"--runs {a.runs}: give at least 1")
    if a.jobs < 1:
        raise UnitError(f"--jobs {a.jobs}: give at least 1")
    # A release, not the bare stack: quinn runs in virtual time, quinn@0.11.11 does not.
    why = virtual.supports(a.stack) or virtual.supports(f"{a.stack}@{a.first}")
    if a.mode == "virtual" and why:
        raise UnitError(f"--mode virtual: {why}; use --mode real")
    versions = releases.between(a.stack, a.first, a.last)
    if a.minors:
        versions = releases.newest_of_each_minor(versions)
    pinned = load(a.stack)
    cc = a.cc or pinned.default_cc
    opts = sweep.Options(a.stack, cc, a.out, quick=a.quick, runs=a.runs, mode=a.mode, select=a.select, jobs=a.jobs)
    say = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    say(f"longlook versions: {a.stack} {', '.join(versions)} ({len(versions)} release{'' if len(versions) == 1 else 's'}), --cc {cc}, "
        f"{a.mode} time{', quick' if a.quick else ''}; results in {a.out}")
    started = time.monotonic()
    done: list[compare.Release] = []
    for n, version in enumerate(versions, 1):
        stack = load(f"{a.stack}@{version}")  # installs on first use
        head = f"[{n}/{len(versions)}] {a.stack}@{version}"
        if cc not in stack.cc:
            say(f"{head}: has no {cc} (it ships {', '.join(sorted(stack.cc))}); left out")
            continue
        say(f"{head}: reference schedules")
        records = sweep.reference(opts, version, progress)
        say(f"{head}: properties ({' '.join(sweep.properties_command(opts, version)[1:4])} …)")
        props = sweep.properties(opts, version, log=_dots(say))
        if props["rc"] not in (0, 1):
            say(f"{head}: pytest exited {props['rc']}; its log is {a.out / version / 'pytest.log'}")
        done.append(compare.release(version, records, sweep.outcomes(opts, version), props["rc"]))
        say(f"{head}: done ({time.monotonic() - started:.0f} s in all)")
    text = render(a.stack, cc, opts, done)
    (a.out / "versions.md").write_text(text + "\n")
    (a.out / "versions.json").write_text(json.dumps([asdict(r) for r in done], indent=1) + "\n")
    print(text)
    return 0 if all(r.properties_rc in (0, 1) for r in done) else 1


def _dots(say):
    """pytest's progress lines (the dots), passed on so a long run is never silent."""
    def line(text: str) -> None:
        if PYTEST_PROGRESS.match(text):
            say(f"  {text}")
    return line


def render(stack: str, cc: str, opts: sweep.Options, done: list[compare.Release]) -> str:
    how = (f"{opts.mode} time; {opts.reference_runs} runs per schedule; properties under the ci profile"
           + (" without the statistical (slow) ones, failures not re-checked in real time (--quick)" if opts.quick else "")
           + (f"; only the properties matching -k {opts.select!r}" if opts.select else ""))
    lines = [f"## {stack} ({cc}), {len(done)} release{'' if len(done) == 1 else 's'}", "", how + ".", "",
             "Reference schedules: " + "; ".join(f"{k}: {v}" for k, v in DESCRIBE.items())
             + ". Goodput: median [min–max] over the runs.", "", compare.table(done), "", "## What changed", ""]
    for old, new in zip(done, done[1:]):
        lines += [compare.render_diff(compare.diff(old, new)), ""]
    if len(done) < 2:
        lines.append("(one release: nothing to compare)")
    return "\n".join(lines).rstrip()
