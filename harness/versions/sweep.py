"""One release's checks, kept under OUT so that a second call reuses them:

    OUT/reference/runs.ndjson     every reference run of every release (harness.reproduce.sweep)
    OUT/<version>/results.ndjson  the properties' records (pytest --results)
    OUT/<version>/properties.json written when the property run ended: its exit
                                  status, command and duration
    OUT/<version>/artifacts/      the kept examples of failing cases (replayable)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.reproduce import sweep as runs
from harness.versions import QUICK_RUNS, REFERENCE, RUNS

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Options:
    stack: str
    cc: str
    out: Path
    quick: bool = False
    runs: int | None = None
    #: "virtual" where the stack runs in it, else "real".
    mode: str = "virtual"
    #: A pytest -k expression choosing the properties (None: all).
    select: str | None = None
    #: pytest-xdist processes for the properties (1: none).
    jobs: int = 1

    @property
    def reference_runs(self) -> int:
        return self.runs or (QUICK_RUNS if self.quick else RUNS)


def reference(opts: Options, version: str, progress=lambda done, total: None) -> list[dict]:
    """The release's reference runs (old and new), each with its goodput and the
    transitions its sender took."""
    label = f"{opts.stack}@{version}"
    todo = runs.plan(REFERENCE, [(label, opts.cc, None)], opts.reference_runs, REFERENCE.quick)
    return runs.sweep(REFERENCE, todo, opts.out / "reference", _with_transitions(opts), progress=progress)


def _with_transitions(opts: Options):
    one = runs.local_transfer(REFERENCE, lambda stack: opts.mode)

    def transfer(run, rundir: Path) -> dict:
        rec = one(run, rundir)
        rec["transitions"] = transitions(rundir, opts.stack, run.cc) if rec["ok"] else {}
        return rec

    return transfer


def transitions(rundir: Path, stack_name: str, cc: str) -> dict[str, int]:
    """'From→To': count, for the data sender's inferred congestion states."""
    from harness.endpoints import load
    from harness.observe.events import PacketSent
    from harness.observe.qlog import read_run
    from harness.observe.states import infer_states, strip_states
    from harness.report.diagram import count_visits

    senders = read_run(rundir, stack_name).get("server", [])
    if not senders:
        return {}
    sender = max(senders, key=lambda t: len(t.of(PacketSent)))
    mss = max((p.size for p in sender.of(PacketSent) if p.size), default=1200)
    beta = load(stack_name).resolve_cc(cc).beta
    visits = count_visits(infer_states(strip_states(sender), beta=beta, mss=mss))
    return {f"{a}→{b}": n for (a, b), n in sorted(visits.transitions.items())}


def properties_command(opts: Options, version: str) -> list[str]:
    d = opts.out / version
    cmd = [sys.executable, "-m", "pytest", str(REPO_ROOT / "properties"), "--impl", f"{opts.stack}@{version}",
           "--cc", opts.cc, "--mode", opts.mode, "--hypothesis-profile", "ci",
           "--results", str(d / "results.ndjson"), "--artifacts", str(d / "artifacts"),
           "-q", "-p", "no:cacheprovider", "--no-header", "-rN"]
    if opts.quick:
        # Minutes, not tens of minutes: the statistical properties (repeated runs,
        # kernel TCP) stay out, and a virtual-time failure is reported as found, not
        # re-run in real time. The table says so.
        cmd += ["-m", "not slow", "--no-real-recheck"]
    if opts.select:
        cmd += ["-k", opts.select]
    if opts.jobs > 1:
        cmd += ["-n", str(opts.jobs)]
    return cmd


def properties(opts: Options, version: str, log=lambda line: None) -> dict:
    """Runs the properties on the release once; a later call with the same command
    reads what it left."""
    d = opts.out / version
    done = d / "properties.json"
    cmd = properties_command(opts, version)
    if done.exists():
        rec = json.loads(done.read_text())
        if rec.get("command") == cmd:
            return rec
        # Asked differently (--quick, --select, --cc): those results do not answer it.
    d.mkdir(parents=True, exist_ok=True)
    done.unlink(missing_ok=True)
    (d / "results.ndjson").unlink(missing_ok=True)  # an interrupted or other run's records
    started = time.monotonic()
    with (d / "pytest.log").open("w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        try:
            for line in proc.stdout:
                out.write(line)
                log(line.rstrip("\n"))
        finally:
            if proc.poll() is None:
                proc.terminate()
            proc.wait()
    rec = {"rc": proc.returncode, "command": cmd, "duration_s": round(time.monotonic() - started, 1)}
    if proc.returncode in (0, 1):  # 1: some case failed; anything else is the run's own failure
        done.write_text(json.dumps(rec) + "\n")
    return rec


def outcomes(opts: Options, version: str) -> dict[str, str]:
    """'property[case]' → outcome, the case named without the release."""
    from harness.results.store import read

    path = opts.out / version / "results.ndjson"
    if not path.exists():
        return {}
    label = f"{opts.stack}@{version}"
    got = {}
    for r in read([path]).records:
        case = (r.get("case") or "").replace(label, opts.stack)
        got[f"{r['property']}[{case}]"] = r["outcome"]
    return got
