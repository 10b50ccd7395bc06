"""Recorded findings: a real stack violates a property, reproducibly or on some runs.

The findings are data (spec/findings.toml), read here for the pytest plugin. The
property stays as it is; its case is marked xfail with the finding's reason: strict
where it reproduces on every run, so a fix upstream turns the run green loudly (an
XPASS fails the run until the entry is removed), non-strict where it is seen on some
runs only. docs/findings.md describes each, with its minimal schedule and replay line.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

#: The recorded findings, one [[finding]] table each.
FINDINGS_FILE = Path(__file__).resolve().parents[2] / "spec" / "findings.toml"


class FindingsError(ValueError):
    """spec/findings.toml cannot be read; the message names the entry and the fix."""


def load(path: Path = FINDINGS_FILE) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """(strict, non-strict) findings, each (property name, case id) → reason."""
    try:
        entries = tomllib.loads(path.read_text()).get("finding", [])
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise FindingsError(f"{path}: {e}") from None
    strict: dict[tuple[str, str], str] = {}
    flaky: dict[tuple[str, str], str] = {}
    for i, entry in enumerate(entries, 1):
        missing = {"property", "case", "strict", "reason"} - set(entry)
        if missing:
            raise FindingsError(f"{path}: finding #{i} lacks {', '.join(sorted(missing))}")
        key = (entry["property"], entry["case"])
        if key in strict or key in flaky:
            raise FindingsError(f"{path}: finding #{i} repeats {key}: keep one entry per case")
        (strict if entry["strict"] else flaky)[key] = entry["reason"]
    return strict, flaky


#: (test function name, case id) → reason shown by pytest.
FINDINGS, FLAKY_FINDINGS = load()
