"""Trace validation: TLC decides whether an observed run is a behaviour of the spec.

    verdict = validate(trace, family="newreno")
    verdict.accepted, verdict.describe(), verdict.steps

The trace is written as TraceLog.tla (harness/model/tracefile.py) next to copies of
spec/CongestionControl.tla and spec/TraceCongestionControl.tla/.cfg in a scratch
directory, and TLC explores it. The spec itself does the judging; this module only
reads TLC's depth (how many records some behaviour matched) and what the spec
printed. On a mismatch TLC runs a second time with TraceStuckAt set to the first
unmatched record, and the spec prints the model state before it, the actions
enabled for it and the windows its relations allow.

A partial trace (observation flagged it: the qlog was cut) is validated as a
prefix: every record it has must match, and the verdict says it was a prefix.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.model import tlavalue, tlc
from harness.model.tracefile import TraceLog, from_trace
from harness.observe.events import Trace

SPEC_DIR = Path(__file__).resolve().parents[2] / "spec"
SPEC_FILES = ("CongestionControl.tla", "TraceCongestionControl.tla", "TraceCongestionControl.cfg")


@dataclass(frozen=True)
class Step:
    """One matched record: the NDJSON line, the model state before it, the action."""

    line: int
    state: str
    action: str
    after: str


@dataclass
class Mismatch:
    line: int                      # NDJSON line (1-based) of the first event no step matched
    event: dict                    # that event, as in the NDJSON
    record: str                    # the TLA+ record it became
    state: str = "?"               # the model's CcState before it
    variables: dict = field(default_factory=dict)
    enabled: list[str] = field(default_factory=list)
    bounds: dict = field(default_factory=dict)

    def describe(self) -> str:
        v = ", ".join(f"{k}={val}" for k, val in self.variables.items())
        return (f"first unmatched event: line {self.line}: {json.dumps(self.event)}\n"
                f"  as record: {self.record}\n"
                f"  model state before it: {self.state}: {v}\n"
                f"  spec actions enabled for it (window left free): {', '.join(self.enabled) or 'none'}\n"
                f"  windows the relations allow: {self.bounds}")


@dataclass
class Verdict:
    stack: str
    source: str
    records: int
    matched: int
    partial: bool
    seconds: float
    steps: list[Step]
    mismatch: Mismatch | None = None

    @property
    def accepted(self) -> bool:
        return self.mismatch is None

    def describe(self) -> str:
        what = "a prefix (the trace is partial)" if self.partial else "the whole trace"
        head = f"{self.stack} {self.source}: {self.records} records"
        if self.accepted:
            return f"{head}: accepted, {what}, in {self.seconds:.2f} s"
        return f"{head}: REJECTED after {self.matched} matched records\n{self.mismatch.describe()}"


def _workdir(log: TraceLog, stuck_at: int, into: Path) -> None:
    for name in SPEC_FILES:
        shutil.copy(SPEC_DIR / name, into / name)
    (into / "TraceLog.tla").write_text(log.module(stuck_at))


def _steps(printed: list[str]) -> list[Step]:
    seen, steps = set(), []
    for line in printed:
        if not line.startswith('<<"step"'):
            continue
        _, n, state, action, after = tlavalue.parse(line)
        if (n, action) not in seen:
            seen.add((n, action))
            steps.append(Step(n, state, action, after))
    return steps


def validate_log(log: TraceLog, trace: Trace, keep: Path | None = None) -> Verdict:
    """Runs TLC on `log` (made from `trace`); `keep` also writes the TLA+ files there."""
    finder = tlc.find()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="longlook-trace-") as tmp:
        work = Path(tmp)
        _workdir(log, 0, work)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            _workdir(log, 0, keep)
        result = tlc.run(work, "TraceCongestionControl", tlc=finder, quick=True)
        matched = (result.depth or 1) - 1
        verdict = Verdict(trace.stack, trace.source, len(log.records), matched, trace.partial, 0.0,
                          _steps(result.printed))
        if result.error is not None and "Diagnose" not in result.error:
            raise tlc.TlcError(f"TLC failed on the trace of {trace.source}: {result.error}")
        if matched < len(log.records):
            verdict.mismatch = _diagnose(log, trace, matched + 1, work, finder)
    verdict.seconds = time.monotonic() - started
    return verdict


def _diagnose(log: TraceLog, trace: Trace, cursor: int, work: Path, finder: tlc.Tlc) -> Mismatch:
    record = log.records[cursor - 1]
    event = trace.events[record.line - 1].to_json()
    mismatch = Mismatch(record.line, event, record.tla())
    (work / "TraceLog.tla").write_text(log.module(cursor))
    result = tlc.run(work, "TraceCongestionControl", tlc=finder, quick=True)
    for line in result.printed:
        if line.startswith('<<"state"'):
            _, mismatch.state, mismatch.variables = tlavalue.parse(line)
        elif line.startswith('<<"enabled"'):
            mismatch.enabled = [k for k, on in tlavalue.parse(line)[1].items() if on]
        elif line.startswith('<<"bounds"'):
            mismatch.bounds = tlavalue.parse(line)[1]
    return mismatch


def validate(trace: Trace, family: str, keep: Path | None = None) -> Verdict:
    """Validates `trace` against the spec for `family` ("newreno" or "cubic").
    Raises tracefile.Unvalidatable when the trace lacks what the spec needs and
    tlc.TlcError when TLC cannot run."""
    return validate_log(from_trace(trace, family), trace, keep)


def read_ndjson(path: Path, stack: str, vantage: str = "server", partial: bool = False) -> Trace:
    """A trace from an NDJSON file (docs/trace.md)."""
    from harness.observe.events import from_json

    events = [from_json(json.loads(ln)) for ln in Path(path).read_text().splitlines() if ln.strip()]
    return Trace(stack, vantage, events, str(path), partial=partial)
