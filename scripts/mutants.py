#!/usr/bin/env python3
"""The mutant zoo (`make mutants`): runs the properties against every mutant of
tests/mutants/catalogue.py and against the stock controllers they mutate, and prints
the table: mutant, killing property, time to kill, shrunk schedule size, and the
mutation score.

A mutant is killed when it fails (not errors, not skips) a property that its stock
controller passed in every stock run (--stock-runs, 3 by default), on an example
that the stock controller passes when it is replayed on it (`longlook replay DIR
--cc STOCK`, in the mode the kill was found in): a schedule the stock fails too
kills nothing, and the mutant's run goes on with the properties after it. The stock
controllers run first because the kills are defined by them; their rows come last
and count false kills: properties a stock controller failed without a recorded
finding (harness/verdict/findings.py). A mutant that survives every property its stock
passes is equivalent on that stack only if its stock fails the very property its bug
breaks (the catalogue's `bug_property`: the stock already has the bug); one that
fails only other properties its stock fails (which every subclass of the stock
inherits) survived.

    scripts/mutants.py                          # everything, ci profile
    scripts/mutants.py --only beta_0_9,quinn/beta-0.9 --stock-runs 1
    scripts/mutants.py --markdown               # the table for BENCHMARKS.md too

Each property run is one pytest process (`--hypothesis-profile ci`: a few
derandomised examples, shrinking bounded) with tests/mutants/zoo_plugin.py
recording every verdict; a mutant's run stops at its first failed property.
Runs in --mode auto (virtual time where the stack and the property allow it, the
plugin's default) unless told otherwise; needs root for the real-time cases; one
run at a time (real-time links).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts._venv import use_checkout_venv  # noqa: E402

use_checkout_venv(__file__)

from tests.mutants.catalogue import MUTANTS, Mutant, impairment_events  # noqa: E402
from tests.mutants.zoo_plugin import RECORD_ENV, STOP_ENV  # noqa: E402

#: Real-time bound on one pytest process; a hung run is reported, not waited for.
RUN_TIMEOUT_S = 3600


@dataclass
class Run:
    """One pytest process: its verdicts by property (file::function)."""

    records: list[dict]
    wall_s: float
    returncode: int

    def outcomes(self) -> dict[str, str]:
        """Worst outcome per property over its parametrisations (one failing flow
        count fails the fairness property)."""
        worst: dict[str, str] = {}
        for r in self.records:
            p = _prop(r["nodeid"])
            if p not in worst or _RANK[r["outcome"]] > _RANK[worst[p]]:
                worst[p] = r["outcome"]
        return worst

    @classmethod
    def load(cls, out: Path) -> Run | None:
        """A finished run's verdicts from its directory (for --report)."""
        if not (out / "verdicts.ndjson").exists():
            return None
        meta = json.loads((out / "run.json").read_text()) if (out / "run.json").exists() else {}
        records = _read(out / "verdicts.ndjson")
        return cls(records, meta.get("wall_s", sum(r["duration_s"] for r in records)), meta.get("returncode", 0))


_RANK = {"passed": 0, "skipped": 1, "xfailed": 2, "xpassed": 3, "error": 4, "failed": 5}


@dataclass
class Verdict:
    mutant: Mutant
    killed_by: dict | None = None
    equivalent_by: list[str] = field(default_factory=list)
    #: Properties the mutant fails where its stock was only inconclusive or skipped:
    #: nothing tells whether they kill it, so the mutant is undecided, not equivalent.
    undecided_by: list[str] = field(default_factory=list)
    #: Failures that are no verdict of a property (a harness error, a crash, a
    #: transfer that never completed): reported apart, never a kill.
    errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    #: Failures whose example the stock failed (or could not decide) too when
    #: replayed on it: "property: stock <outcome> on the same example".
    unconfirmed: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    events: int | None = None

    @property
    def status(self) -> str:
        """killed; equivalent (its stock fails the very property its bug breaks);
        undecided (it fails only where its stock was inconclusive); else survived,
        also when it fails only other properties its stock fails (inherited)."""
        if self.killed_by:
            return "killed"
        if self.mutant.bug_property and self.mutant.bug_property in self.equivalent_by:
            return "equivalent"
        if self.undecided_by:
            return "undecided"
        return "survived"

    def to_json(self) -> dict:
        return {"name": self.mutant.name, "status": self.status, "stack": self.mutant.stack, "cc": self.mutant.cc, "bug": self.mutant.bug,
                "killed_by": self.killed_by, "events": self.events, "equivalent_by": self.equivalent_by,
                "undecided_by": self.undecided_by, "errors": self.errors, "failed": self.failed,
                "unconfirmed": self.unconfirmed, "wall_s": round(self.wall_s)}

    @classmethod
    def from_json(cls, m: Mutant, d: dict) -> Verdict:
        return cls(m, d["killed_by"], d["equivalent_by"], d["undecided_by"], d["errors"], d["failed"],
                   d.get("unconfirmed", []), d["wall_s"], d["events"])


def _prop(nodeid: str) -> str:
    """properties/test_x.py::test_y[aioquic-newreno] → properties/test_x.py::test_y"""
    return nodeid.split("[", 1)[0]


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


#: --mode for every property run (the plugin's: auto, real or virtual).
MODE = "auto"


def run_pytest(label: str, stack: str, cc: str, targets: list[str], out: Path, profile: str,
               stop_at_failure: bool) -> Run:
    """Runs the properties `targets` on stack/cc; prints each verdict as it comes."""
    out.mkdir(parents=True, exist_ok=True)
    record = out / "verdicts.ndjson"
    record.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "pytest", *targets, "--impl", stack, "--cc", cc,
            "--hypothesis-profile", profile, "--mode", MODE, "--artifacts", str(out / "artifacts"),
            # A kill is confirmed on the stock controller in the mode it was found in
            # (replay_on_stock); a real-time replay of each would double its time.
            "--no-real-recheck",
            "-p", "tests.mutants.zoo_plugin", "-p", "no:cacheprovider", "-q", "-rN",
            "--junitxml", str(out / "junit.xml")]
    env = dict(os.environ, **{RECORD_ENV: str(record), STOP_ENV: "1" if stop_at_failure else "0"})
    started = time.monotonic()
    with (out / "pytest.log").open("w") as log:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            _follow(label, proc, record, started)
        finally:
            if proc.poll() is None:
                # SIGTERM lets the harness remove its namespaces (seen: pytest
                # can sit on a SIGINT in the middle of a Hypothesis example).
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    run = Run(_read(record), time.monotonic() - started, proc.wait())
    (out / "run.json").write_text(json.dumps({"wall_s": round(run.wall_s, 1), "returncode": run.returncode}) + "\n")
    return run


def _follow(label: str, proc: subprocess.Popen, record: Path, started: float) -> int:
    """Prints each verdict as pytest records it, until the process ends."""
    seen = 0
    while True:
        try:
            proc.wait(timeout=2)
            done = True
        except subprocess.TimeoutExpired:
            done = False
        records = _read(record)
        for r in records[seen:]:
            _log(f"    {label}: {_prop(r['nodeid']).split('::')[-1]} {r['outcome']} "
                 f"({r['duration_s']:.0f} s){'  ' + r['message'] if r.get('message') else ''}")
        seen = len(records)
        if done:
            return seen
        if time.monotonic() - started > RUN_TIMEOUT_S:
            _log(f"    {label}: stopped after {RUN_TIMEOUT_S} s")
            return seen


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _leftover_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith("ll-")]


@dataclass
class Stock:
    """A stock controller's verdicts over several runs."""

    stack: str
    cc: str
    runs: list[Run]

    def passed_always(self) -> list[str]:
        """Properties passed in every run, fastest first (the order mutants run them).
        An XPASS is a pass: a non-strict finding's case, judged, that did not show
        its deviation that run (aioquic's F27, 1 run in 60); a mutant's failure there
        that matches the finding's signature is an xfail, never a kill."""
        props = [set(p for p, o in r.outcomes().items() if o in ("passed", "xpassed")) for r in self.runs]
        always = set.intersection(*props) if props else set()
        times: dict[str, list[float]] = {}
        for r in self.runs:
            for rec in r.records:
                times.setdefault(_prop(rec["nodeid"]), []).append(rec["duration_s"])
        return sorted(always, key=lambda p: (statistics.median(times.get(p, [0])), p))

    def not_passed(self) -> list[str]:
        everything = {p for r in self.runs for p in r.outcomes()}
        return sorted(everything - set(self.passed_always()))

    def failed_sometimes(self) -> set[str]:
        """Properties the stock failed (or xfailed, a recorded finding) in some run:
        only these can make a mutant that fails them equivalent."""
        return {p for r in self.runs for p, o in r.outcomes().items() if o in ("failed", "xfailed")}

    def false_kills(self) -> list[str]:
        """Properties a stock run failed outright. Recorded findings are xfails; a
        strict one that passes is reported failed ([XPASS(strict)]), so it counts
        here; "xpassed" is a flaky finding's non-strict pass, which is no kill."""
        return sorted({p for r in self.runs for p, o in r.outcomes().items() if o == "failed"})


def snapshot(paths: list[str]) -> list[str]:
    """The property functions under `paths` now, so that every run of this
    invocation sees the same set while others add properties to the tree."""
    argv = [sys.executable, "-m", "pytest", *paths, "--collect-only", "-q", "-p", "no:cacheprovider"]
    r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    found = [line.strip() for line in r.stdout.splitlines() if "::" in line]
    if r.returncode != 0 or not found:
        raise SystemExit(f"collecting {' '.join(paths)} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return list(dict.fromkeys(_prop(n) for n in found))


def run_stock(stack: str, cc: str, n: int, props: list[str], out: Path, profile: str, report: bool,
              reuse: bool = False) -> Stock:
    runs = []
    for i in range(n):
        d = out / f"stock-{stack}-{cc}-{i + 1}"
        if reuse and not report and (run := Run.load(d)) is not None:
            _log(f"[stock {stack}/{cc} run {i + 1}/{n}: kept from {d}]")
        elif report:
            run = Run.load(d)
            if run is None:
                raise SystemExit(f"--report: no stock run in {d}")
        else:
            _log(f"[stock {stack}/{cc} run {i + 1}/{n}]")
            run = run_pytest(f"{stack}/{cc}#{i + 1}", stack, cc, props, d, profile, stop_at_failure=False)
        runs.append(run)
    return Stock(stack, cc, runs)


def run_mutant(m: Mutant, stock: Stock, out: Path, profile: str, report: bool) -> Verdict:
    """Runs the properties its stock passed, stopping at the first failure; a failure
    whose example the stock passes on replay is the kill, one the stock fails too is
    set aside and the rest run on. If nothing kills it, the properties its stock did
    not pass (equivalence)."""
    d = out / m.name.replace("/", "-")
    if report:
        saved = d / "mutant.json"
        if not saved.exists():
            raise SystemExit(f"--report: no verdict of {m.name} in {saved}")
        return Verdict.from_json(m, json.loads(saved.read_text()))
    passing = stock.passed_always()
    others = [p for p in stock.not_passed() if p not in passing]
    v = Verdict(m)
    records: list[dict] = []
    remaining, attempt = list(passing), 1
    while remaining:
        run = run_pytest(m.name, m.stack, m.cc, remaining, d if attempt == 1 else d.with_name(f"{d.name}-{attempt}"),
                         profile, stop_at_failure=True)
        v.wall_s += run.wall_s
        records += run.records
        kill = _kill(run, remaining)
        if kill is None:
            break
        stock_says, took = replay_on_stock(kill, m.stock)
        v.wall_s += took
        kill["stock_replay"] = stock_says
        if stock_says == "passed":
            v.killed_by = kill
            break
        prop = _prop(kill["nodeid"])
        _log(f"    {m.name}: {prop.split('::')[-1]} not a kill: the stock {stock_says} on the same example")
        v.unconfirmed.append(f"{prop.split('::')[-1]}: stock {stock_says} on the same example")
        if stock_says == "undecided":
            # A property its stock passes in every run failed the mutant, on an example
            # (often the shrunk one) where the stock's trigger never happened: neither a
            # kill nor a survival.
            v.undecided_by.append(prop)
        ran = {_prop(r["nodeid"]) for r in run.records}
        remaining = [p for p in remaining if p not in ran]
        attempt += 1
    if v.killed_by is None and others:
        extra = run_pytest(m.name + " (stock-failing properties)", m.stack, m.cc, others,
                           d.with_name(d.name + "-equivalence"), profile, stop_at_failure=False)
        v.wall_s += extra.wall_s
        records += extra.records
        failing = {_prop(r["nodeid"]) for r in extra.records if is_verdict(r)}
        v.equivalent_by = sorted(failing & stock.failed_sometimes())
        v.undecided_by = sorted(set(v.undecided_by) | (failing - stock.failed_sometimes()))
    v.failed = [_prop(r["nodeid"]) for r in records if r["outcome"] == "failed"]
    v.errors = sorted({f"{_prop(r['nodeid']).split('::')[-1]}: {r.get('message') or '?'}" for r in records
                       if r["outcome"] in ("failed", "error") and not is_verdict(r)})
    example = (v.killed_by or {}).get("example")
    if example and (Path(example) / "example.json").exists():
        v.events = impairment_events(json.loads((Path(example) / "example.json").read_text())["schedule"])
    d.mkdir(parents=True, exist_ok=True)
    (d / "mutant.json").write_text(json.dumps(v.to_json(), indent=2) + "\n")
    return v


def replay_on_stock(kill: dict, stock_cc: str) -> tuple[str, float]:
    """Replays the killing example on the stock controller, in the mode it ran in:
    ("passed" | "failed" | "undecided", seconds). Without a kept example the kill
    cannot be confirmed: undecided."""
    from harness.virtual.recheck import replay_verdict

    example = kill.get("example")
    if not example or not (Path(example) / "example.json").exists():
        return "undecided", 0.0
    argv = [sys.executable, "-m", "harness.cli", "replay", example, "--cc", stock_cc, "--mode", "saved"]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return "undecided", time.monotonic() - started
    took = time.monotonic() - started
    (Path(example) / "stock-replay.txt").write_text(done.stdout + done.stderr)
    verdict = replay_verdict(done.stdout + done.stderr)
    return ("failed" if verdict.startswith("REPRODUCED") else "passed" if verdict.startswith("did not reproduce")
            else "undecided"), took


def is_verdict(record: dict) -> bool:
    """Whether a failed record is a property's own verdict: its assertion, on a
    transfer that completed. A harness error, a TLC time-out, a crash or a transfer
    that never finished is no kill, however the mutant caused it."""
    message = record.get("message") or ""
    return (record["outcome"] == "failed" and message.startswith(("AssertionError", "Deviation_"))
            and not message.startswith("Deviation_transfer_failed") and ": transfer failed:" not in message)


def _kill(run: Run, passing: list[str]) -> dict | None:
    return next((r for r in run.records if is_verdict(r) and _prop(r["nodeid"]) in passing), None)


def table(verdicts: list[Verdict], stocks: list[Stock], markdown: bool) -> str:
    rows = [("mutant", "stack", "bug", "killing property", "time to kill", "shrunk events", "verdict")]
    for v in verdicts:
        k = v.killed_by
        if k:
            rows.append((v.mutant.name, v.mutant.stack, v.mutant.bug, _prop(k["nodeid"]).split("::")[-1],
                         f"{k['time_to_failure_s']:.0f} s", "?" if v.events is None else str(v.events), "killed"))
        elif v.status == "equivalent":
            rows.append((v.mutant.name, v.mutant.stack, v.mutant.bug, "—", "—", "—",
                         f"equivalent: stock fails {v.mutant.bug_property.split('::')[-1]} too"))
        elif v.status == "undecided":
            rows.append((v.mutant.name, v.mutant.stack, v.mutant.bug, "—", "—", "—",
                         "undecided: stock inconclusive on " + ", ".join(p.split("::")[-1] for p in v.undecided_by)))
        else:
            notes = v.unconfirmed + [f"fails only what its stock fails: {p.split('::')[-1]}" for p in v.equivalent_by]
            rows.append((v.mutant.name, v.mutant.stack, v.mutant.bug, "—", "—", "—",
                         "SURVIVED" + (" (" + "; ".join(notes) + ")" if notes else "")))
    for s in stocks:
        n = len(s.runs)
        fk = s.false_kills()
        rows.append((f"stock {s.cc}", s.stack, f"{n} run(s)", f"{len(s.passed_always())} passed every run",
                     "—", "—", "false kills: " + (", ".join(p.split("::")[-1] for p in fk) if fk else "0")))
    if markdown:
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def summary(verdicts: list[Verdict]) -> str:
    killed = [v for v in verdicts if v.killed_by]
    equivalent = [v for v in verdicts if v.status == "equivalent"]
    undecided = [v for v in verdicts if v.status == "undecided"]
    errors = [v for v in verdicts if v.errors]
    scored = len(verdicts) - len(equivalent) - len(undecided)
    times = [v.killed_by["time_to_failure_s"] for v in killed]
    events = [v.events for v in killed if v.events is not None]
    parts = [f"mutation score {len(killed)}/{scored} = {100 * len(killed) / scored:.0f}%" if scored else "no mutants",
             f"({len(equivalent)} equivalent on their stack, not scored)" if equivalent else "",
             f"({len(undecided)} undecided: stock inconclusive, not scored)" if undecided else "",
             f"{len(errors)} with harness errors apart from verdicts" if errors else ""]
    if times:
        parts.append(f"median time to kill {statistics.median(times):.0f} s")
    if events:
        parts.append(f"median shrunk schedule {statistics.median(events):.0f} events, max {max(events)}")
    return "; ".join(p for p in parts if p)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated mutant names (default: all in tests/mutants/catalogue.py)")
    ap.add_argument("--stacks", help="only mutants of these stacks, comma-separated")
    ap.add_argument("--properties", nargs="+", default=["properties/"], help="property files (default: properties/)")
    ap.add_argument("--profile", default="ci", help="Hypothesis profile: the fixed budget (default ci)")
    ap.add_argument("--stock-runs", type=int, default=3, help="runs of each stock controller (default 3)")
    ap.add_argument("--mode", choices=("auto", "real", "virtual"), default="auto",
                    help="where the properties run (default auto: virtual time where the stack and property allow)")
    ap.add_argument("--out", type=Path, default=REPO / "artifacts" / "mutants", help="results and artifacts")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown too")
    ap.add_argument("--report", action="store_true", help="run nothing: rebuild the table from --out's runs")
    ap.add_argument("--reuse-stock", action="store_true",
                    help="keep the stock runs already in --out (score more mutants against the same stock)")
    a = ap.parse_args(argv)
    # A plain SIGTERM would end this process without stopping the pytest child.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    global MODE
    MODE = a.mode

    chosen = list(MUTANTS)
    if a.only:
        names = set(a.only.split(","))
        unknown = names - {m.name for m in MUTANTS}
        if unknown:
            ap.error(f"--only: unknown mutants {sorted(unknown)}; known: {', '.join(m.name for m in MUTANTS)}")
        chosen = [m for m in chosen if m.name in names]
    if a.stacks:
        chosen = [m for m in chosen if m.stack in a.stacks.split(",")]
    if os.geteuid() != 0 and not a.report:
        ap.error("needs root (network namespaces), like every property run")
    started = time.monotonic()
    a.out.mkdir(parents=True, exist_ok=True)

    props = [] if a.report else snapshot(a.properties)
    if props:
        _log(f"[{len(props)} properties: {', '.join(p.split('::')[-1] for p in props)}]")
    stocks: dict[tuple[str, str], Stock] = {}
    for key in dict.fromkeys((m.stack, m.stock) for m in chosen):
        stocks[key] = run_stock(*key, a.stock_runs, props, a.out, a.profile, a.report, a.reuse_stock)
    if a.report:
        props = sorted({p for s in stocks.values() for r in s.runs for p in r.outcomes()})
    verdicts = []
    for i, m in enumerate(chosen, 1):
        _log(f"[mutant {i}/{len(chosen)}: {m.name} ({m.bug}), {_clock(time.monotonic() - started)} so far]")
        v = run_mutant(m, stocks[(m.stack, m.stock)], a.out, a.profile, a.report)
        _log(f"  → {'killed by ' + _prop(v.killed_by['nodeid']).split('::')[-1] if v.killed_by else 'not killed'}"
             f" in {_clock(v.wall_s)}")
        verdicts.append(v)
        left = _leftover_namespaces()
        if left:
            _log(f"  ! namespaces left behind: {left}")

    result = {
        "profile": a.profile, "mode": a.mode, "stock_runs": a.stock_runs, "properties": props, "wall_s": round(time.monotonic() - started),
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "mutants": [v.to_json() for v in verdicts],
        "stock": [{"stack": s.stack, "cc": s.cc, "passed_every_run": s.passed_always(),
                   "false_kills": s.false_kills(), "runs": [r.outcomes() for r in s.runs]} for s in stocks.values()],
    }
    (a.out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    print(table(verdicts, list(stocks.values()), markdown=False))
    print(summary(verdicts))
    if a.markdown:
        print()
        print(table(verdicts, list(stocks.values()), markdown=True))
    print(f"total {_clock(time.monotonic() - started)}; details in {a.out / 'results.json'}")
    for v in verdicts:
        for error in v.errors:
            print(f"error (no verdict, not a kill): {v.mutant.name}: {error}")
    survived = [v for v in verdicts if v.status == "survived"]
    false_kills = [s for s in stocks.values() if s.false_kills()]
    return 1 if survived or false_kills else 0


if __name__ == "__main__":
    sys.exit(main())
