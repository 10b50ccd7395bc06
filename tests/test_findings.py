"""The recorded findings (spec/findings.toml) stay consistent with the suite and
with docs/findings.md: a stale key would silently mark nothing, and a reason that
cites no written-up finding leaves a reader of an XFAIL with nowhere to go."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness import endpoints
from harness.verdict.findings import FINDINGS, FLAKY_FINDINGS, STACK_WIDE

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = [(key, reason, True) for key, reason in FINDINGS.items()] + \
          [(key, reason, False) for key, reason in FLAKY_FINDINGS.items()]
IDS = [f"{'strict' if strict else 'flaky'}:{name}[{target}]" for (name, target), _, strict in ENTRIES]


def _property_names() -> set[str]:
    names = set()
    for path in (ROOT / "properties").glob("test_*.py"):
        tree = ast.parse(path.read_text())
        names |= {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    return names


def _written_up() -> set[str]:
    text = (ROOT / "docs" / "findings.md").read_text()
    return set(re.findall(r"^## (F\d+)\b", text, flags=re.M))


PROPERTIES = _property_names()
WRITTEN_UP = _written_up()


@pytest.mark.parametrize("key, reason, strict", ENTRIES, ids=IDS)
def test_entry_names_a_property_and_a_target(key, reason, strict):
    name, target = key
    assert name in PROPERTIES or name == STACK_WIDE, \
        f"{name}: no such property in properties/test_*.py (renamed or removed?)"
    stack = next((s for s in endpoints.STACKS if target.startswith(s + "-")), None)
    assert stack, f"{target}: starts with no known stack ({', '.join(endpoints.STACKS)})"
    cc, _, flows = target[len(stack) + 1:].partition("-")
    assert cc in endpoints.load(stack).cc, f"{target}: {stack} has no controller {cc!r}"
    # After the controller: a count (a parametrisation), or the rest of a Target id,
    # "upload" and/or "to-<receiver stack>" (harness.run.Target.id).
    peers = "|".join(re.escape(s) for s in endpoints.STACKS)
    assert flows == "" or flows.isdigit() or re.fullmatch(rf"(upload)?(-?to-({peers}))?", flows), \
        f"{target}: the part after the controller must be a count, or upload and/or to-<stack>"


@pytest.mark.parametrize("key, reason, strict", ENTRIES, ids=IDS)
def test_reason_cites_a_written_up_finding(key, reason, strict):
    number = re.match(r"F\d+\b", reason)
    assert number, f"{key}: the reason must start with its finding number, e.g. 'F8: …'"
    assert number.group() in WRITTEN_UP, f"{key}: docs/findings.md has no '## {number.group()}' section"
    assert reason.rstrip().endswith("docs/findings.md"), f"{key}: the reason must end by pointing at docs/findings.md"


@pytest.mark.parametrize("key, reason, strict", [e for e in ENTRIES if not e[2]],
                         ids=[i for i, e in zip(IDS, ENTRIES) if not e[2]])
def test_a_flaky_finding_says_how_often(key, reason, strict):
    assert re.match(r"F\d+ \([^)]*\b\d+ of \d+", reason), \
        f"{key}: a non-strict finding's reason starts 'F<n> (<k> of <n> runs…)' so a reader can weigh an XPASS"


def test_no_case_is_both_strict_and_flaky():
    both = FINDINGS.keys() & FLAKY_FINDINGS.keys()
    assert not both, f"listed as strict and as flaky: {sorted(both)}"


def test_a_stack_wide_finding_joins_a_propertys_own(tmp_path, monkeypatch):
    """kwik's F63 is recorded for every property; a case with its own finding (F68 on
    bursts) expects either deviation, with its own strictness."""
    from types import SimpleNamespace

    from harness.verdict import findings

    target = SimpleNamespace(id="kwik-newreno", sender_id="kwik-newreno", stack=SimpleNamespace(release_dir=None))
    strict, reason, sig = findings.finding_for("test_bursts_stay_within_the_initial_window", "kwik-newreno", target)
    kinds = [s["kind"] for s in sig]
    assert not strict and reason.startswith("F68") and "F63" in reason
    assert [s["_reason"][:3] for s in sig] == ["F68", "F63"]  # each table names its finding
    assert kinds == ["burst-beyond-initial-window", "transfer-failed"]
    strict, reason, sig = findings.finding_for("test_window_never_exceeded", "kwik-newreno", target)
    assert reason.startswith("F63") and sig == {"kind": "transfer-failed"}
    assert findings.finding_for("test_window_never_exceeded", "quinn-newreno",
                                SimpleNamespace(id="quinn-newreno", sender_id="quinn-newreno",
                                                stack=SimpleNamespace(release_dir=None))) is None


def test_a_stack_wide_finding_must_not_be_strict(tmp_path):
    from harness.verdict import findings

    p = tmp_path / "f.toml"
    p.write_text('[[finding]]\nproperty = "*"\ncase = "kwik-newreno"\nstrict = true\n'
                 'signature = { kind = "transfer-failed" }\nreason = "F63: x; docs/findings.md"\n')
    with pytest.raises(findings.FindingsError, match="only a non-strict finding"):
        findings.load_all(p)


def test_a_finding_of_one_direction_is_not_carried_to_the_other():
    """F104 is quiche's server's (its idle probes in a download): quiche's client,
    uploading, is judged on its own, while a finding without a direction (F1,
    quic-go's β) holds in both."""
    from types import SimpleNamespace

    from harness.verdict import findings

    def target(stack, cc, direction):
        suffix = "-upload" if direction == "upload" else ""
        return SimpleNamespace(id=f"{stack}-{cc}{suffix}", sender_id=f"{stack}-{cc}", direction=direction,
                               stack=SimpleNamespace(release_dir=None))

    name = "test_probes_with_nothing_to_send_are_one_packet"
    assert findings.finding_for(name, "quiche-newreno", target("quiche", "newreno", "download"))[1].startswith("F104")
    assert findings.finding_for(name, "quiche-newreno-upload", target("quiche", "newreno", "upload")) is None
    beta = "test_recovery_reduces_window_by_beta"
    assert findings.finding_for(beta, "quic-go-newreno-upload", target("quic-go", "newreno", "upload"))[1] \
        .startswith("F1:")


def test_a_findings_direction_is_download_or_upload(tmp_path):
    from harness.verdict import findings

    p = tmp_path / "f.toml"
    p.write_text('[[finding]]\nproperty = "test_x"\ncase = "quinn-newreno"\nstrict = true\ndirection = "both"\n'
                 'signature = { kind = "k" }\nreason = "F1: x; docs/findings.md"\n')
    with pytest.raises(findings.FindingsError, match='direction = .both.*"download" or "upload"'):
        findings.load_all(p)
    directions = {}
    p.write_text(p.read_text().replace('"both"', '"download"'))
    findings.load_all(p, directions=directions)
    assert directions == {("test_x", "quinn-newreno"): "download"}
