"""One property case as a JSON record, from what the pytest plugin gathered.

The plugin's hook only gathers (the call-phase report once the verdict's outcomes
settled it, the exception, the case's target, the runner's ledger and kept example
directories) and calls ``build``; everything about the record's shape is here.
Every value is plain JSON (str, int, float, bool, None, list, dict), so a record
crosses pytest-xdist's channel from a worker to the controller as it is.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import traceback
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.results import FORMAT

#: The fields of a record, in the order they are written.
FIELDS = ("format", "property", "nodeid", "requirements", "sections", "stack", "version", "cc", "family", "beta",
          "peer", "direction", "case", "mode", "mode_option", "backend", "outcome", "reason", "finding", "examples", "deviations", "verdict",
          "artifacts", "schedule", "replay", "duration_s", "phase", "worker", "finished")
#: How many lines of the verdict text a record keeps, and how long each may be.
VERDICT_LINES, LINE_CHARS = 12, 300
FINDING_ID = re.compile(r"\s*(F\d+)\b")


def build(report, exc: BaseException | None, *, prop: str, case: str | None, target: Any = None,
          mode: str | None = None, mode_option: str | None = None, backend: str | None = None, ledger: Any = None,
          kept: list[Path] | None = None) -> dict:
    """The record of one case. ``report`` is pytest's TestReport of the call phase
    (or of a setup that did not pass), after harness.verdict.outcomes.settle;
    ``ledger`` a harness.verdict.outcomes.Ledger or None; ``kept`` the runner's kept
    example directories for the case (the last one is the one replayed)."""
    outcome, reason = outcome_of(report)
    kept = [Path(k) for k in kept or []]
    stack, cc = getattr(target, "stack", None), getattr(target, "cc", None)
    rec = {
        "format": FORMAT,
        "property": prop,
        "nodeid": report.nodeid,
        "requirements": requirement_ids(prop),
        "sections": sections(prop),
        "stack": getattr(stack, "name", None),
        "version": getattr(stack, "version", None),
        "cc": getattr(cc, "name", None),
        "family": getattr(cc, "family", None),
        "beta": getattr(cc, "beta", None),
        # The judged stack is the data's sender; its peer (None: the same stack) is the
        # receiver, and the direction says which of them is the client.
        "peer": getattr(getattr(target, "peer", None), "name", None),
        "direction": getattr(target, "direction", None),
        "case": case,
        "mode": mode,
        "mode_option": mode_option,
        "backend": backend,
        "outcome": outcome,
        "reason": reason,
        "finding": _finding(report, outcome, reason),
        "examples": None,
        "deviations": deviations(exc, ledger) if outcome in ("failed", "error", "expected failure") else [],
        "verdict": verdict_text(report, exc, reason),
        "artifacts": [str(k) for k in kept],
        "schedule": _schedule(kept[-1]) if kept else None,
        "replay": _replay(kept[-1]) if kept else None,
        "duration_s": round(float(getattr(report, "duration", 0.0)), 3),
        "phase": report.when,
        "worker": os.environ.get("PYTEST_XDIST_WORKER"),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    # The ledger counts the examples judged that passed; a failing one was judged too
    # (failed: 1 when a deviation, not a crash, ended the case).
    rec["examples"] = {"judged": getattr(ledger, "judged", 0) + any(d["kind"] for d in rec["deviations"]),
                       "failed": int(any(d["kind"] for d in rec["deviations"])),
                       "inconclusive": len(getattr(ledger, "inconclusive", [])),
                       "not_exercised": len(getattr(ledger, "not_exercised", []))}
    return rec


def outcome_of(report) -> tuple[str, str | None]:
    """(outcome, reason): the reason of a skip, an inconclusive or not-exercised case,
    an expected failure (the finding's text) or an error; None for a verdict."""
    own = getattr(report, "longlook_outcome", None)
    xfail = getattr(report, "wasxfail", None)
    if own is not None:
        return own, _skip_reason(report).removeprefix(f"{own}: ")
    if report.skipped:
        return ("expected failure", xfail) if xfail is not None else ("skipped", _skip_reason(report))
    if report.passed:
        return ("unexpected pass", xfail) if xfail is not None else ("passed", None)
    if report.when != "call":
        return "error", _first_line(report.longreprtext)
    return "failed", None


def _finding(report, outcome: str, reason: str | None) -> str | None:
    if outcome in ("expected failure", "unexpected pass"):
        return finding_id(getattr(report, "wasxfail", None) or reason)
    strict_xpass = isinstance(report.longrepr, str) and report.longrepr.startswith("[XPASS(strict)]")
    return finding_id(report.longrepr.removeprefix("[XPASS(strict)]")) if strict_xpass else None


def finding_id(reason: str | None) -> str | None:
    """The F-number a finding's reason starts with (spec/findings.toml: "F4: ...")."""
    m = FINDING_ID.match(reason or "")
    return m.group(1) if m else None


def _skip_reason(report) -> str:
    lr = report.longrepr
    text = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr or "")
    # Hypothesis' note on a skip raised in an explicit @example is already gone:
    # harness.verdict.outcomes.settle keeps the property's reason alone.
    return text.removeprefix("Skipped: ")


def leaves(exc: BaseException) -> list[BaseException]:
    """An exception group flattened to its leaves; any other exception alone."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in leaves(e)]
    return [exc]


def _schedule(example: Path) -> dict | None:
    """The replayed example's schedule (its schedule.json), so the record alone says
    what the link did; None when the example kept none."""
    try:
        return json.loads((example / "schedule.json").read_text())
    except (OSError, ValueError):
        return None


def deviations(exc: BaseException | None, ledger: Any = None) -> list[dict]:
    """Each failure behind the verdict: a deviation's kind and measured values, or
    another exception's type (kind None) and first line; each distinct one once (an
    explicit example and a drawn one often fail alike). A rejection (not exercised,
    inconclusive) is no failure: when Hypothesis's replay of a real-time failure was
    rejected, the failures are those the runner recorded in the ledger."""
    if exc is None:
        return []
    from hypothesis.errors import UnsatisfiedAssumption

    from harness.verdict.deviation import Deviation

    failed = [leaf for leaf in leaves(exc) if not isinstance(leaf, UnsatisfiedAssumption)]
    if not failed:
        failed = list(getattr(ledger, "failures", [])) or leaves(exc)
    out = []
    for leaf in failed:
        if isinstance(leaf, Deviation):
            message = AssertionError.__str__(leaf)
            out.append({"kind": leaf.kind, "measured": plain(leaf.measured), "message": _first_line(message)})
        else:
            out.append({"kind": None, "exception": type(leaf).__name__, "message": _first_line(str(leaf))})
    return [d for i, d in enumerate(out) if d not in out[:i]]


def verdict_text(report, exc: BaseException | None, reason: str | None) -> str:
    """The first lines of what the verdict said: the settled message (a finding that
    describes another deviation, a strict finding's case undecided), the exception,
    and the plugin's outcome notes."""
    parts = []
    if isinstance(report.longrepr, str):
        parts.append(report.longrepr)
    elif reason:
        parts.append(reason)
    # A skip's exception repeats its reason, with Hypothesis' note naming an explicit
    # example (its arguments' reprs) when it was raised in one: the reason says it all.
    skipped = report.skipped and not getattr(report, "wasxfail", None)  # an xfail reports as skipped too
    if exc is not None and not (skipped and reason):
        parts.append("".join(traceback.format_exception_only(type(exc), exc)).strip())
    parts += [text for title, text in getattr(report, "sections", []) if title == "longlook outcome"]
    lines = [line[:LINE_CHARS] for line in "\n".join(parts).splitlines()]
    return "\n".join(lines[:VERDICT_LINES] + ([f"… ({len(lines) - VERDICT_LINES} more lines)"]
                                              if len(lines) > VERDICT_LINES else []))


def plain(value: Any) -> Any:
    """`value` as plain JSON: numbers that are not finite as strings ("inf", "nan"),
    tuples and sets as lists, anything else unknown as its str."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if hasattr(value, "__float__") and not isinstance(value, (bytes, str)):  # numpy scalars
        try:
            return plain(float(value))
        except (TypeError, ValueError):
            pass
    return str(value)


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:LINE_CHARS]


def _replay(example_dir: Path) -> str:
    from harness.run import replay_command

    return replay_command(example_dir)


@lru_cache(maxsize=1)
def _catalogue():
    from harness.verdict import requirements

    try:
        return requirements.load()
    except requirements.RequirementsError:
        return []  # tests/test_requirements.py fails loudly on a broken catalogue; a record need not


def requirement_ids(prop: str) -> list[str]:
    """The ids of the catalogue's requirements that `prop` judges (spec/requirements.toml)."""
    from harness.verdict.requirements import ids_for

    return ids_for(prop, _catalogue())


def sections(prop: str) -> list[list[str]]:
    """[rfc, section] of each requirement `prop` judges, distinct, in catalogue order."""
    seen = [[r.rfc, r.section] for r in _catalogue() if prop in r.properties]
    return [list(s) for s in dict.fromkeys(map(tuple, seen))]
