"""`longlook report --baseline OLD_RESULTS…`: what changed since an earlier run.

Cells are matched by property, stack, controller and backend, not by version or mode,
so that a new release of a stack, or virtual time against real time, is compared
with what it replaces. Each changed cell is one of:

- **regression**: failed, an error or an unexpected pass now (a strict finding that
  no longer shows is news too), where the baseline had none of these;
- **improvement**: the baseline failed or errored there, and now it does not;
- **changed**: any other change of outcome (e.g. passed → inconclusive);
- **new**: no such cell in the baseline (a new property or stack).

The report marks each changed cell with what it was, lists them on changes.html, and
`longlook report` exits 1 when there is a regression.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.results import OUTCOMES

#: Outcomes that a gate fails on.
BAD = ("failed", "error", "unexpected pass")


def match_key(prop: str, row: tuple) -> tuple:
    """(property, stack, controller, backend) of a cell (row: stack, version, cc, mode, backend)."""
    stack, _version, cc, _mode, backend = row
    return prop, stack, cc, backend


@dataclass(frozen=True)
class Change:
    kind: str  # "regression" | "improvement" | "changed" | "new"
    was: str | None
    now: str


def classify(was: str | None, now: str) -> Change | None:
    """The change from outcome `was` (None: no such cell) to `now`; None if none."""
    if was == now:
        return None
    if was is None:
        return Change("new", None, now)
    if now in BAD and was not in BAD:
        return Change("regression", was, now)
    if was in BAD and now not in BAD:
        return Change("improvement", was, now)
    return Change("changed", was, now)


def compare(cells: dict, old: dict[tuple, list[str]]) -> dict[tuple, Change]:
    """Cell key (property, row) → its change against the baseline: `old` holds the
    baseline records' outcomes by `match_key`."""
    changes = {}
    for key, cell in cells.items():
        was = old.get(match_key(*key))
        change = classify(min(was, key=OUTCOMES.index) if was else None, cell.outcome)
        if change is not None:
            changes[key] = change
    return changes


def summary(changes: dict[tuple, Change]) -> str:
    counts = {k: sum(c.kind == k for c in changes.values()) for k in ("regression", "improvement", "changed", "new")}
    plural = {"regression": "regressions", "improvement": "improvements"}
    return ", ".join(f"{n} {plural.get(k, k) if n != 1 else k}" for k, n in counts.items())
