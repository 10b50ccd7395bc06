"""Results files: NDJSON, one record a line, appended as the cases end, read back
and merged for ``longlook report``.

Only one process writes a file: under pytest-xdist the workers build the records and
send them with their reports, and the controller appends them (``Writer``), one line
at a time under an exclusive lock, so a reader never sees half a record even while
a run is going on. Sharded runs write a file each; ``read`` merges any number of
them, and a case run twice (the same node id, stack version, mode and backend) keeps
its later record. Every bad input ends in one ``ResultsError`` naming the file (and
the line), never a traceback.
"""

from __future__ import annotations

import fcntl
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from harness.results import FORMAT, OUTCOMES


class ResultsError(ValueError):
    """A results file cannot be read or written; the message names it and the fix."""


class Writer:
    """Appends records to `path`, which it empties first (a run writes its own file)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("")
        except OSError as e:
            raise ResultsError(f"--results {self.path}: cannot write ({e.strerror or e})") from None

    def append(self, record: dict) -> None:
        line = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
        with self.path.open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.write(line)
                f.flush()
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


@dataclass
class Results:
    """The merged records, with where they came from and what was replaced."""

    records: list[dict] = field(default_factory=list)
    sources: list[tuple[str, int]] = field(default_factory=list)  # (file, records read)
    replaced: int = 0


REQUIRED = ("format", "property", "nodeid", "outcome", "examples")


class _Examples(msgspec.Struct):
    judged: int = 0
    failed: int = 0
    inconclusive: int = 0
    not_exercised: int = 0


class _Deviation(msgspec.Struct):
    kind: str | None = None
    measured: dict[str, Any] = {}
    message: str = ""
    exception: str | None = None


class _Record(msgspec.Struct):
    """The types of the fields the report reads (harness/results/record.py writes
    them): a record that breaks one is named with the field's path, never met later
    as a traceback from the report. Other fields pass through unchecked."""

    format: int
    property: str
    nodeid: str
    outcome: str
    examples: _Examples
    requirements: list[str] = []
    sections: list[tuple[str, str]] = []
    stack: str | None = None
    version: str | None = None
    cc: str | None = None
    family: str | None = None
    beta: float | None = None
    peer: str | None = None
    direction: Literal["download", "upload"] | None = None
    case: str | None = None
    mode: str | None = None
    mode_option: str | None = None
    backend: str | None = None
    reason: str | None = None
    finding: str | None = None
    deviations: list[_Deviation] = []
    verdict: str | None = None
    artifacts: list[str] = []
    replay: str | None = None
    schedule: dict[str, Any] | None = None
    duration_s: float = 0.0


def _check_types(rec: dict, where: str) -> None:
    try:
        msgspec.convert(rec, _Record)
    except msgspec.ValidationError as e:
        raise ResultsError(f"{where}: not a results record of this longlook: {e}") from None


def read(paths: list[Path]) -> Results:
    """Every record of `paths` (files, or directories holding *.ndjson), merged."""
    files = _expand(paths)
    out = Results()
    index: dict[tuple, int] = {}
    for path in files:
        n = 0
        for rec in _records(path):
            n += 1
            key = (rec["nodeid"], rec.get("version"), rec.get("mode_option") or rec.get("mode"), rec.get("backend"))
            if key in index:
                out.records[index[key]] = rec
                out.replaced += 1
            else:
                index[key] = len(out.records)
                out.records.append(rec)
        out.sources.append((str(path), n))
    return out


def _expand(paths: list[Path]) -> list[Path]:
    if not paths:
        raise ResultsError("no results given: name the files `pytest properties/ --results FILE.ndjson` wrote")
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("*.ndjson"))
            if not found:
                raise ResultsError(f"{p}: a directory with no *.ndjson results in it")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise ResultsError(f"{p}: no such results file or directory")
    return files


def _records(path: Path):
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ResultsError(f"{path}: cannot read ({e})") from None
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{no}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            last = no == len(text.splitlines()) and not text.endswith("\n")
            hint = " (truncated: the run was cut off while writing it?)" if last else ""
            raise ResultsError(f"{where}: not a JSON record{hint}: {e.msg}") from None
        if not isinstance(rec, dict):
            raise ResultsError(f"{where}: not a JSON object")
        if rec.get("format") != FORMAT:
            raise ResultsError(f"{where}: results format {rec.get('format')!r}, this longlook reads format "
                               f"{FORMAT}: re-run the properties with this version, or report with the one "
                               f"that wrote them")
        missing = [k for k in REQUIRED if k not in rec]
        if missing:
            raise ResultsError(f"{where}: the record lacks {', '.join(missing)}")
        _check_types(rec, where)
        if rec["outcome"] not in OUTCOMES:
            raise ResultsError(f"{where}: unknown outcome {rec['outcome']!r} (one of {', '.join(OUTCOMES)})")
        yield rec


#: A record's outcome as harness.verdict.requirements' per-stack outcome words.
_AS_COVERAGE = {"failed": "failed", "error": "error", "expected failure": "finding", "unexpected pass": "passed",
                "passed": "passed", "inconclusive": "inconclusive", "not exercised": "not exercised"}


def coverage(records: list[dict]) -> tuple[list[list[str]], list[list[str]]]:
    """The requirement catalogue's table (requirements.table), a column per
    stack-controller in `records`, and its counts per strength; plain rows."""
    from harness.verdict import requirements as rq

    results: dict[tuple[str, str], str] = {}
    for rec in records:
        if not rec.get("case"):
            continue
        kind = _AS_COVERAGE.get(rec["outcome"])
        if kind is None:  # a skip: by its reason's prefix, as from JUnit XML
            reason = rec.get("reason") or ""
            kind = next((k for prefix, k in rq.SKIPS if reason.startswith(prefix)), "skipped")
        key = (rec["property"], rq.column(rec["case"]))
        if key not in results or rq.RANK.index(kind) < rq.RANK.index(results[key]):
            results[key] = kind
    reqs = rq.load()
    return rq.table(reqs, results or None), rq.counts(reqs)
