"""Trace validation: TLC decides whether an observed run is a behaviour of the spec.

    verdict = validate(trace, family="newreno")
    verdict.accepted, verdict.describe(), verdict.steps

The trace is written as TraceLog.tla (harness/model/tracefile.py) next to copies of
spec/CongestionControl.tla and spec/TraceCongestionControl.tla/.cfg in a scratch
directory, and TLC explores it. The spec itself does the judging; this module only
reads TLC's depth (how many records some behaviour matched) and what the spec
printed. On a mismatch TLC runs a second time with TraceStuckAt set to the
unmatched record, and the spec prints the model state before it, the actions
enabled for it and the windows its relations allow.

At a record no step explains, the deviation is recorded (with its kind: the rule
it breaks, from the record and the model state) and validation goes on from the
record after it: TLC starts again from the model's state with what that record
logged adopted. A later record of a kind already reported is taken the same way by
the spec itself in that run (TraceTolerate) and counted as a repeat. So one run lists
its distinct deviations, not only the first, and judges the trace to its end.

A partial trace (observation flagged it: the qlog was cut) is validated as a
prefix: every record it has must match, and the verdict says it was a prefix.
"""

from __future__ import annotations

import json
import re
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


#: A trace with more distinct deviations than this is cut short. A deviation of a kind
#: already reported is no new one: the spec takes it and goes on (TraceTolerate), so
#: the trace is judged to its end for every other kind.
MAX_DEVIATIONS = 8


@dataclass
class Mismatch:
    line: int                      # NDJSON line (1-based) of an event no step matched
    event: dict                    # that event, as in the NDJSON
    record: str                    # the TLA+ record it became
    k: str = "other"               # the record's kind ("cwnd", "sent", ...)
    logged: int = -1               # the window or ssthresh the record logged
    state: str = "?"               # the model's CcState before it
    variables: dict = field(default_factory=dict)
    enabled: list[str] = field(default_factory=list)
    bounds: dict = field(default_factory=dict)

    #: Every kind `kind` can return (spec/findings.toml signatures are checked against it).
    KINDS = ("window-growth-in-recovery", "window-growth-while-app-limited", "window-growth-too-fast", "reduction-out-of-bounds",
             "reduction-in-recovery", "reduction-without-loss", "ssthresh-unexplained", "sent-unexplained",
             "acked-unexplained", "lost-unexplained", "pto-unexplained", "other-unexplained")

    @property
    def kind(self) -> str:
        """What rule the record broke, from the record and the model state before it:
        the deviation's signature in a recorded finding (spec/findings.toml)."""
        v = self.variables
        if self.k == "cwnd" and "congestion_window" in v:
            if self.logged > v["congestion_window"]:
                if v.get("in_recovery"):
                    return "window-growth-in-recovery"
                # §7.8: a sender whose application ran dry, with under half its window in flight.
                return "window-growth-while-app-limited" if v.get("app_limited") else "window-growth-too-fast"
            if v.get("reduction_due") or v.get("lost_since_update"):
                return "reduction-out-of-bounds"
            return "reduction-in-recovery" if v.get("in_recovery") else "reduction-without-loss"
        return f"{self.k}-unexplained"

    @property
    def measured(self) -> dict:
        model = self.variables.get("congestion_window")
        out = {"state": self.state, "line": self.line}
        if self.k == "cwnd" and model:
            out["factor"] = self.logged / model
            out["window"] = self.logged  # B: what the stack set, e.g. a reset to a fixed value
        return out

    def resume(self) -> dict | None:
        """The model state to go on from: the state before this record, with what the
        record logged adopted (a window or an ssthresh); any other record is passed
        over. None when the state could not be read."""
        v = dict(self.variables)
        if not RESUME_VARIABLES <= set(v):
            return None
        v["inflight"] = set(v["inflight"])
        if self.k == "cwnd":
            if self.logged < v["congestion_window"]:
                v["reduction_due"] = False
            v.update(congestion_window=self.logged, credit=0, carry=0, lost_since_update=False)
        elif self.k == "ssthresh":
            v["ssthresh"] = self.logged
        return {k: v[k] for k in sorted(RESUME_VARIABLES)}

    def describe(self) -> str:
        v = ", ".join(f"{k}={val}" for k, val in self.variables.items() if k != "inflight")
        return (f"unmatched event ({self.kind}): line {self.line}: {json.dumps(self.event)}\n"
                f"  as record: {self.record}\n"
                f"  model state before it: {self.state}: {v}\n"
                f"  spec actions enabled for it (window left free): {', '.join(self.enabled) or 'none'}\n"
                f"  windows the relations allow: {self.bounds}")


#: The spec's variables, all printed by its Diagnose and read back by Resumed.
RESUME_VARIABLES = frozenset({
    "congestion_window", "ssthresh", "bytes_in_flight", "inflight", "largest_sent", "largest_acked",
    "recovery_start", "in_recovery", "credit", "carry", "reduction_due", "lost_since_update",
    "pto_count", "ack_pending", "app_limited", "cause", "reductions"})


@dataclass
class Verdict:
    stack: str
    source: str
    records: int
    matched: int                   # records matched before the first deviation
    partial: bool
    seconds: float
    steps: list[Step]
    mismatches: list[Mismatch] = field(default_factory=list)
    cut_short: bool = False        # MAX_DEVIATIONS reached, or the state could not be resumed
    #: (line, kind) of each later record that repeated a kind already reported.
    repeats: list[tuple[int, str]] = field(default_factory=list)

    def lines(self, kind: str) -> list[int]:
        """Every NDJSON line that deviated with `kind`: its first, then its repeats."""
        return sorted({m.line for m in self.mismatches if m.kind == kind} | {n for n, k in self.repeats if k == kind})

    @property
    def mismatch(self) -> Mismatch | None:
        return self.mismatches[0] if self.mismatches else None

    @property
    def accepted(self) -> bool:
        return not self.mismatches

    def describe(self) -> str:
        what = "a prefix (the trace is partial)" if self.partial else "the whole trace"
        head = f"{self.stack} {self.source}: {self.records} records"
        if self.accepted:
            return f"{head}: accepted, {what}, in {self.seconds:.2f} s"
        kinds = ", ".join(dict.fromkeys(m.kind for m in self.mismatches))
        more = " (cut short: more distinct deviations than the limit)" if self.cut_short else ""
        again = f", repeated at {len(self.repeats)} later record(s)" if self.repeats else ""
        return (f"{head}: REJECTED: {len(self.mismatches)} deviation(s){again}{more} ({kinds}); "
                f"{self.matched} records matched before the first\n"
                + "\n".join(m.describe() for m in self.mismatches))


def _workdir(log: TraceLog, into: Path, stuck_at: int = 0, start: int = 1, resume: dict | None = None,
             tolerate: frozenset[str] = frozenset()) -> None:
    for name in SPEC_FILES:
        shutil.copy(SPEC_DIR / name, into / name)
    (into / "TraceLog.tla").write_text(log.module(stuck_at, start, resume, tolerate))


def _repeats(printed: list[str]) -> list[tuple[int, str]]:
    out = []
    for line in printed:
        if re.match(r'<<\s*"tolerated"', line):
            _, n, kind = tlavalue.parse(line)
            out.append((n, kind))
    return list(dict.fromkeys(out))


def _steps(printed: list[str]) -> list[Step]:
    seen, steps = set(), []
    for line in printed:
        if not re.match(r'<<\s*"step"', line):  # TLC pads long tuples: << "step", …
            continue
        _, n, state, action, after = tlavalue.parse(line)
        if (n, action) not in seen:
            seen.add((n, action))
            steps.append(Step(n, state, action, after))
    return steps


def validate_log(log: TraceLog, trace: Trace, keep: Path | None = None) -> Verdict:
    """Runs TLC on `log` (made from `trace`); `keep` also writes the TLA+ files there.

    At a record no step of the spec explains, the deviation is recorded and TLC is
    run again from the record after it, starting from the model's state with what
    the record logged adopted (Mismatch.resume), until the trace ends or
    MAX_DEVIATIONS: one run lists every distinct deviation, not only the first. The
    kinds reported so far are tolerated in the runs after (their repeats counted in
    Verdict.repeats), so each kind costs two TLC runs however often it recurs."""
    finder = tlc.find()
    started = time.monotonic()
    verdict = Verdict(trace.stack, trace.source, len(log.records), 0, trace.partial, 0.0, [])
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        _workdir(log, keep)
    start, resume = 1, None
    with tempfile.TemporaryDirectory(prefix="longlook-trace-") as tmp:
        work = Path(tmp)
        while True:
            tolerate = frozenset(m.kind for m in verdict.mismatches)
            _workdir(log, work, 0, start, resume, tolerate)
            result = tlc.run(work, "TraceCongestionControl", tlc=finder, quick=True)
            if result.error is not None and "Diagnose" not in result.error:
                raise tlc.TlcError(f"TLC failed on the trace of {trace.source}: {result.error}")
            reached = start - 1 + (result.depth or 1) - 1
            verdict.steps += _steps(result.printed)
            verdict.repeats += _repeats(result.printed)
            if not verdict.mismatches:
                verdict.matched = reached
            if reached >= len(log.records):
                break
            mismatch = _diagnose(log, trace, reached + 1, work, finder, start, resume, tolerate)
            resume = mismatch.resume()
            previous = verdict.mismatches[-1] if verdict.mismatches else None
            if previous is not None and previous.line == mismatch.line:
                # Another record of the same event (the ssthresh logged with the
                # window just adopted): part of that deviation, not a new one.
                pass
            else:
                verdict.mismatches.append(mismatch)
            if resume is None or len(verdict.mismatches) >= MAX_DEVIATIONS:
                verdict.cut_short = reached + 1 < len(log.records)
                break
            start = reached + 2
            if start > len(log.records):
                break
    verdict.seconds = time.monotonic() - started
    return verdict


def _diagnose(log: TraceLog, trace: Trace, cursor: int, work: Path, finder: tlc.Tlc,
              start: int = 1, resume: dict | None = None, tolerate: frozenset[str] = frozenset()) -> Mismatch:
    record = log.records[cursor - 1]
    event = trace.events[record.line - 1].to_json()
    logged = record.cwnd if record.k == "cwnd" else record.ssth if record.k == "ssthresh" else -1
    mismatch = Mismatch(record.line, event, record.tla(), record.k, logged)
    _workdir(log, work, cursor, start, resume, tolerate)
    result = tlc.run(work, "TraceCongestionControl", tlc=finder, quick=True)
    for line in result.printed:
        if re.match(r'<<\s*"state"', line):
            _, mismatch.state, mismatch.variables = tlavalue.parse(line)
        elif re.match(r'<<\s*"enabled"', line):
            mismatch.enabled = [k for k, on in tlavalue.parse(line)[1].items() if on]
        elif re.match(r'<<\s*"bounds"', line):
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
