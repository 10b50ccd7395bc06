"""The requirement catalogue (spec/requirements.toml): what RFC 9002, RFC 9438 and
RFC 9406 require of a sender, and for each rule the property or model action that
judges it, or why it cannot be seen from outside, or what a property would need.

It is data, like the findings: a property judges a rule, the catalogue only says
which, so the coverage table (``longlook coverage --requirements``) and
tests/test_requirements.py read one file. A failure is a *violation* of a MUST and
a *deviation* from a SHOULD, a MAY's limit or the RFC's example algorithm, because
stack maintainers answer the two differently (docs/requirements.md).
"""

from __future__ import annotations

import re
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

REQUIREMENTS_FILE = Path(__file__).resolve().parents[2] / "spec" / "requirements.toml"
#: RFC strengths; SUITE marks the suite's own bounds (rfc = "suite"), which no RFC sets.
STRENGTHS = ("MUST", "SHOULD", "MAY", "EXAMPLE")
SUITE = "SUITE"
#: A judge "model:Action" is an action of spec/CongestionControl.tla; trace validation,
#: and so this property's case, is what applies it to a run.
MODEL_PREFIX = "model:"
MODEL_PROPERTY = "test_run_is_a_behaviour_of_the_model"
VERDICTS = ("judged_by", "unobservable", "unjudged")
FIELDS = {"id", "rfc", "section", "strength", "quote", "rationale", "family", "note", *VERDICTS}
#: Families a column's controller name can be read as (the XML names no family).
FAMILIES = ("newreno", "cubic", "bbr")


class RequirementsError(ValueError):
    """The catalogue or a results file cannot be read; the message names the entry and the fix."""


@dataclass(frozen=True)
class Requirement:
    id: str
    rfc: str
    section: str
    strength: str
    text: str  # the RFC's words (quote), or why the suite holds the bound (rationale)
    judged_by: tuple[str, ...] = ()
    unobservable: str | None = None
    unjudged: str | None = None
    family: str | None = None
    note: str | None = None

    @property
    def status(self) -> str:
        return "judged" if self.judged_by else "not observable" if self.unobservable else "unjudged"

    @property
    def properties(self) -> tuple[str, ...]:
        """The property functions whose cases decide this rule per stack."""
        names = (MODEL_PROPERTY if j.startswith(MODEL_PREFIX) else j for j in self.judged_by)
        return tuple(dict.fromkeys(names))

    @property
    def failure(self) -> str:
        """What a failed judge means for this rule: a MUST is violated, the rest deviated from."""
        return "violation" if self.strength == "MUST" else "failure" if self.strength == SUITE else "deviation"


def load(path: Path = REQUIREMENTS_FILE) -> list[Requirement]:
    try:
        entries = tomllib.loads(path.read_text()).get("requirement", [])
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise RequirementsError(f"{path}: {e}") from None
    seen: dict[str, int] = {}
    return [_entry(path, i, raw, seen) for i, raw in enumerate(entries, 1)]


def _entry(path: Path, i: int, raw: dict, seen: dict[str, int]) -> Requirement:
    where = f"{path}: requirement #{i} ({raw.get('id', 'no id')})"
    suite = raw.get("rfc") == "suite"
    text_field = "rationale" if suite else "quote"
    missing = [f for f in ("id", "rfc", "section", "strength", text_field) if not raw.get(f)]
    if missing:
        raise RequirementsError(f"{where} lacks {', '.join(missing)}: add "
                                f"{'them' if len(missing) > 1 else 'it'} (docs/requirements.md lists the fields)")
    unknown = sorted(set(raw) - FIELDS)
    if unknown:
        raise RequirementsError(f"{where} has unknown field(s) {', '.join(unknown)}: "
                                f"use only {', '.join(sorted(FIELDS))}")
    strength = raw["strength"]
    allowed = (SUITE,) if suite else STRENGTHS
    if strength not in allowed:
        raise RequirementsError(f"{where} has strength {strength!r}: use one of {', '.join(allowed)}"
                                + ("" if suite else f" ({SUITE} only with rfc = \"suite\")"))
    given = [v for v in VERDICTS if v in raw]
    if len(given) != 1:
        raise RequirementsError(f"{where} has {' and '.join(given) or 'none of them'}: give exactly one of "
                                f"judged_by (properties or model:Action), unobservable (why) or unjudged (what "
                                f"a property would need)")
    judges = raw.get("judged_by", [])
    if "judged_by" in raw and (not isinstance(judges, list) or not judges
                               or not all(isinstance(j, str) and j for j in judges)):
        raise RequirementsError(f"{where}: judged_by must be a non-empty list of names, "
                                f'e.g. ["test_x", "model:ReduceWindow"]')
    family = raw.get("family")
    if family is not None and family not in FAMILIES:
        raise RequirementsError(f"{where} has family {family!r}: use one of {', '.join(FAMILIES)}, or leave it out")
    if raw["id"] in seen:
        raise RequirementsError(f"{where} repeats the id of requirement #{seen[raw['id']]}: "
                                f"give each requirement its own id")
    seen[raw["id"]] = i
    return Requirement(raw["id"], str(raw["rfc"]), str(raw["section"]), strength, raw[text_field], tuple(judges),
                       raw.get("unobservable"), raw.get("unjudged"), family, raw.get("note"))


def ids_for(prop: str, reqs: list[Requirement]) -> list[str]:
    """The ids of the requirements the property `prop` judges (model actions included
    for the trace-validation property)."""
    return [r.id for r in reqs if prop in r.properties]


# ------------------------------------------------------------ per-stack outcomes

#: Worst first: a failure anywhere shows, then a finding, then a verdict over no verdict.
RANK = ("failed", "error", "finding", "passed", "inconclusive", "not exercised", "not observable",
        "not applicable", "skipped")
#: Skip reasons (harness.verdict.outcomes) by the prefix of their message.
SKIPS = (("capability:", "not observable"), ("real time only:", "not observable"),
         ("not applicable:", "not applicable"), ("not exercised", "not exercised"),
         ("inconclusive", "inconclusive"))


def _outcome(case: ET.Element) -> str:
    for child in case:
        if child.tag == "failure":
            return "failed"
        if child.tag == "error":
            return "error"
        if child.tag == "skipped":
            if child.get("type") == "pytest.xfail":
                return "finding"
            message = (child.get("message") or "").removeprefix("Skipped: ")
            return next((kind for prefix, kind in SKIPS if message.startswith(prefix)), "skipped")
    return "passed"


def column(param: str) -> str:
    """The stack-controller a case ran on, from its parametrisation id: a count
    (competing flows) is a parameter of the case, not of the stack."""
    return "-".join(p for p in param.split("-") if not p.isdigit())


def read_junit(paths: list[Path]) -> dict[tuple[str, str], str]:
    """(property, stack-controller) → outcome over pytest JUnit XML files; a case
    run more than once (several files, flow counts) keeps the first of RANK."""
    out: dict[tuple[str, str], str] = {}
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            raise RequirementsError(f"{path}: cannot read JUnit XML ({e}); give the files "
                                    f"`pytest properties/ --junitxml FILE` wrote") from None
        for case in root.iter("testcase"):
            m = re.fullmatch(r"(test_\w+)\[(.+)\]", case.get("name", ""))
            if not m:
                continue
            key, kind = (m.group(1), column(m.group(2))), _outcome(case)
            if key not in out or RANK.index(kind) < RANK.index(out[key]):
                out[key] = kind
    return out


def cell(req: Requirement, col: str, results: dict[tuple[str, str], str]) -> str:
    if req.status != "judged":
        return req.status
    cc = col.rsplit("-", 1)[-1]
    if req.family and cc in FAMILIES and cc != req.family:
        return "not applicable"  # a CUBIC rule on a NewReno case passes for the wrong reason
    seen = [results[(p, col)] for p in req.properties if (p, col) in results]
    if not seen:
        return "not run"
    worst = min(seen, key=RANK.index)
    return {"failed": f"judged: {req.failure}", "finding": f"finding: {req.failure}",
            "passed": "judged"}.get(worst, worst)


def table(reqs: list[Requirement], results: dict[tuple[str, str], str] | None = None) -> list[list[str]]:
    """Rows, header first: id, strength, section, a cell per stack-controller in
    `results` (none without), and the judge: its names, or why there is none."""
    cols = sorted({c for _, c in results}) if results else []
    rows = [["requirement", "strength", "section", *cols, "judge"]]
    for r in reqs:
        judge = (", ".join(r.judged_by) if r.judged_by
                 else f"not observable: {r.unobservable}" if r.unobservable else f"unjudged: {r.unjudged}")
        rows.append([r.id, r.strength, _source(r),
                     *(cell(r, c, results) for c in cols), judge])
    return rows


def _source(r: Requirement) -> str:
    if r.rfc == "suite":
        return f"suite: {r.section}"
    return f"{r.rfc} §{r.section}" if r.rfc.startswith("draft-") else f"RFC {r.rfc} §{r.section}"


def counts(reqs: list[Requirement]) -> list[list[str]]:
    """Rows, header first: per strength, how many are judged, not observable, unjudged."""
    statuses = ("judged", "not observable", "unjudged")
    rows = [["strength", *statuses, "total"]]
    for s in (*STRENGTHS, SUITE):
        mine = [r for r in reqs if r.strength == s]
        rows.append([s, *(str(sum(r.status == t for r in mine)) for t in statuses), str(len(mine))])
    return rows


def render(rows: list[list[str]]) -> str:
    """Plain columns (rich is not a dependency); the last column is left unpadded, as
    it holds the longest text."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join([*(v.ljust(w) for v, w in zip(row, widths)), row[-1]]).rstrip() for row in rows)
