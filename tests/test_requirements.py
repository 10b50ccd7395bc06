"""The requirement catalogue (spec/requirements.toml) stays in step with the
properties and the spec: a property no requirement names judges nothing anyone can
look up, and a judge that no longer exists would show a rule as judged that nothing
checks. Also the loader's messages and the per-stack coverage table."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from harness import cli
from harness.verdict import requirements as rq

from test_findings import _property_names

ROOT = Path(__file__).resolve().parent.parent
REQS = rq.load()
RAW = tomllib.loads(rq.REQUIREMENTS_FILE.read_text())["requirement"]


def _tla_definitions(name: str) -> set[str]:
    """Operators defined at the start of a line: `Name ==` or `Name(args) ==`."""
    text = (ROOT / "spec" / name).read_text()
    return set(re.findall(r"^([A-Za-z]\w*)\s*(?:\([^)]*\))?\s*==", text, flags=re.M))


PROPERTIES = _property_names()
ACTIONS = _tla_definitions("CongestionControl.tla")
TRACE_SPEC = (ROOT / "spec" / "TraceCongestionControl.tla").read_text()


def test_the_catalogue_loads_and_covers_the_rfcs():
    assert len(REQS) > 50
    assert {r.rfc for r in REQS} == {"9002", "9438", "9406", "draft-ietf-ccwg-bbr-06", "suite"}


def test_every_property_judges_some_requirement():
    judged = {p for r in REQS for p in r.judged_by}
    missing = sorted(PROPERTIES - judged)
    assert not missing, (f"{missing}: no requirement of spec/requirements.toml lists them in judged_by; "
                         f"add what they judge (an RFC rule, or a suite entry with rfc = \"suite\")")


@pytest.mark.parametrize("req", [r for r in REQS if r.judged_by], ids=lambda r: r.id)
def test_every_judge_exists(req):
    for judge in req.judged_by:
        if judge.startswith(rq.MODEL_PREFIX):
            action = judge.removeprefix(rq.MODEL_PREFIX)
            assert action in ACTIONS, f"{req.id}: {judge}: spec/CongestionControl.tla defines no {action}"
            # An action trace validation never takes judges no run.
            assert re.search(rf"\b{action}\b", TRACE_SPEC), (
                f"{req.id}: {judge} is not part of trace validation (spec/TraceCongestionControl.tla), "
                f"so no run is judged by it; name a property, or mark the rule unjudged")
        else:
            assert judge in PROPERTIES, f"{req.id}: {judge}: no such property in properties/test_*.py"
    assert rq.MODEL_PROPERTY in PROPERTIES


def test_ids_are_unique_and_say_where_they_come_from():
    ids = [e["id"] for e in RAW]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    for r in REQS:
        # The BBR draft's sections are titles, not numbers: its ids start "bbr-".
        prefix = ("suite-" if r.rfc == "suite" else "bbr-" if r.rfc.startswith("draft-ietf-ccwg-bbr")
                  else f"{r.rfc}-{r.section}-")
        assert r.id.startswith(prefix), f"{r.id}: should start with {prefix!r} (rfc and section)"


@pytest.mark.parametrize("req", REQS, ids=lambda r: r.id)
def test_strength_and_quote_agree(req):
    assert req.strength in (*rq.STRENGTHS, rq.SUITE)
    assert len(req.text.split()) <= 45, f"{req.id}: quote the normative sentence only (under ~40 words)"
    keywords = {"MUST": ("MUST", "REQUIRED", "SHALL"), "SHOULD": ("SHOULD", "RECOMMENDED"), "MAY": ("MAY",)}
    if req.strength in keywords:
        assert any(k in req.text for k in keywords[req.strength]), (
            f"{req.id}: strength {req.strength} but the quote carries no such keyword")


def test_ids_for_a_property():
    ids = rq.ids_for("test_pto_backs_off_exponentially", REQS)
    assert "9002-6.2.1-pto-backoff" in ids
    # The trace-validation property carries every rule a model action judges.
    assert "9002-6.2.1-backoff-reset" in rq.ids_for(rq.MODEL_PROPERTY, REQS)
    assert rq.ids_for("test_nothing", REQS) == []


GOOD = '''
[[requirement]]
id = "9002-7.2-x"
rfc = "9002"
section = "7.2"
strength = "MUST"
quote = "It MUST."
unjudged = "a property"
'''


@pytest.mark.parametrize("text, expected", [
    (GOOD.replace('quote = "It MUST."\n', ""), ["#1 (9002-7.2-x)", "lacks quote"]),
    (GOOD.replace('"MUST"', '"MUSTNT"'), ["9002-7.2-x", "'MUSTNT'", "MUST, SHOULD, MAY, EXAMPLE"]),
    (GOOD + GOOD, ["#2 (9002-7.2-x)", "repeats the id of requirement #1"]),
    (GOOD + 'unobservable = "why"\n', ["9002-7.2-x", "unobservable and unjudged", "exactly one"]),
    (GOOD.replace('unjudged = "a property"\n', ""), ["9002-7.2-x", "has none of them", "exactly one"]),
    (GOOD.replace('unjudged = "a property"', "judged_by = []"), ["9002-7.2-x", "non-empty list"]),
    (GOOD.replace('strength = "MUST"', 'strength = "SUITE"'), ["9002-7.2-x", "'SUITE'", 'rfc = "suite"']),
    (GOOD.replace("unjudged", "unjudgd"), ["9002-7.2-x", "unknown field", "unjudgd"]),
    (GOOD.replace('rfc = "9002"', 'rfc = "suite"'), ["9002-7.2-x", "lacks rationale"]),
])
def test_the_loader_names_the_bad_entry(tmp_path, text, expected):
    path = tmp_path / "requirements.toml"
    path.write_text(text)
    with pytest.raises(rq.RequirementsError) as e:
        rq.load(path)
    for part in expected:
        assert part in str(e.value), str(e.value)


CATALOGUE = '''
[[requirement]]
id = "9002-6.2.1-backoff"
rfc = "9002"
section = "6.2.1"
strength = "MUST"
quote = "MUST be increased"
judged_by = ["test_pto", "model:OnPtoExpired"]

[[requirement]]
id = "9438-4.6-beta"
rfc = "9438"
section = "4.6"
strength = "SHOULD"
family = "cubic"
quote = "SHOULD be set to 0.7"
judged_by = ["test_beta"]

[[requirement]]
id = "9002-7.7-pace"
rfc = "9002"
section = "7.7"
strength = "SHOULD"
quote = "SHOULD pace"
unjudged = "gaps on the wire"

[[requirement]]
id = "9002-5.3-local"
rfc = "9002"
section = "5.3"
strength = "SHOULD"
quote = "SHOULD subtract"
unobservable = "internal"
'''

CASES = {
    "test_pto[aioquic-cubic]": '<failure message="gaps"/>',
    "test_run_is_a_behaviour_of_the_model[aioquic-cubic]": "",
    "test_pto[quiche-cubic]": '<skipped type="pytest.skip" message="capability: quiche logs no packet lost"/>',
    "test_pto[quic-go-newreno]": '<skipped type="pytest.skip" message="not exercised: no blackhole reached"/>',
    "test_beta[aioquic-cubic]": '<skipped type="pytest.xfail" message="F2: docs/findings.md"/>',
    "test_beta[quiche-cubic]": "",
    "test_beta[quic-go-newreno]": "",
    "test_beta[quinn-cubic-2]": "",
    "test_beta[quinn-cubic-1]": '<skipped type="pytest.skip" message="inconclusive: server CPU"/>',
}


def _junit(tmp_path: Path) -> Path:
    body = "".join(f'<testcase classname="properties.test_x" name="{n}">{c}</testcase>' for n, c in CASES.items())
    path = tmp_path / "out.xml"
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    return path


def test_the_table_gives_each_stack_its_cell(tmp_path):
    (tmp_path / "r.toml").write_text(CATALOGUE)
    reqs = rq.load(tmp_path / "r.toml")
    rows = rq.table(reqs, rq.read_junit([_junit(tmp_path)]))
    header, body = rows[0], {row[0]: dict(zip(rows[0], row)) for row in rows[1:]}
    assert header == ["requirement", "strength", "section", "aioquic-cubic", "quic-go-newreno", "quiche-cubic",
                      "quinn-cubic", "judge"]
    backoff, beta = body["9002-6.2.1-backoff"], body["9438-4.6-beta"]
    assert backoff["aioquic-cubic"] == "judged: violation"   # a MUST failed; the model's pass does not hide it
    assert backoff["quiche-cubic"] == "not observable"       # skipped for a capability
    assert backoff["quic-go-newreno"] == "not exercised"
    assert backoff["quinn-cubic"] == "not run"
    assert beta["aioquic-cubic"] == "finding: deviation"     # a SHOULD's recorded finding
    assert beta["quiche-cubic"] == "judged"
    assert beta["quic-go-newreno"] == "not applicable"       # a CUBIC rule on a NewReno case
    assert beta["quinn-cubic"] == "judged"                   # one flow count judged, another inconclusive
    assert body["9002-7.7-pace"]["aioquic-cubic"] == "unjudged"
    assert body["9002-5.3-local"]["quinn-cubic"] == "not observable"
    assert beta["judge"] == "test_beta" and body["9002-7.7-pace"]["judge"] == "unjudged: gaps on the wire"


def test_the_command_prints_the_catalogue_and_the_stacks(tmp_path, capsys):
    assert cli.main(["coverage", "--requirements"]) == 0
    static = capsys.readouterr().out
    assert all(r.id in static for r in REQS)
    assert re.search(r"^MUST\s+\d+\s+\d+\s+\d+\s+\d+$", static, flags=re.M), static[-400:]
    assert cli.main(["coverage", "--requirements", str(_junit(tmp_path))]) == 0
    per_stack = capsys.readouterr().out
    assert "quic-go-newreno" in per_stack.splitlines()[0]
    assert cli.main(["coverage", "--requirements", str(tmp_path / "missing.xml")]) == 2
    assert "cannot read JUnit XML" in capsys.readouterr().err
