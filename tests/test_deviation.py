"""Issue 17, part 2: findings that mask nothing. A recorded finding absorbs only the
deviation its signature names; a second, different deviation in the same case, a
transfer failure or any other exception fails the run. Trace validation goes on past
a deviation, so one trace shows every distinct one."""

from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.model import validate
from harness.observe.events import Metrics
from harness.verdict import findings
from harness.verdict.deviation import Deviation, check, deviation, matches, raise_all
from harness.verdict.outcomes import Ledger, settle

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "traces"
F5 = ("test_run_is_a_behaviour_of_the_model", "aioquic-cubic")


def _xfailed_report(reason: str):
    r = types.SimpleNamespace(outcome="skipped", when="call", location=("properties/test_x.py", 9, "test_x"),
                              longrepr="Deviation", sections=[], wasxfail=reason)
    r.passed, r.failed, r.skipped = False, False, True
    return r


def _settled(exc: BaseException, finding: tuple):
    r = _xfailed_report(finding[1])
    settle(r, types.SimpleNamespace(excinfo=types.SimpleNamespace(value=exc)), Ledger(judged=1), finding)
    r.failed, r.skipped = r.outcome == "failed", r.outcome == "skipped"
    return r


def test_a_signature_matches_kind_and_measured_ranges():
    beta = deviation("beta", "cut to 0.7", factor=0.7, reduction=1)
    assert matches(beta, {"kind": "beta", "measured": {"factor": [0.65, 0.75]}})
    assert matches(beta, {"kind": ["no-collapse", "beta"]})
    assert matches(beta, {"kind": "beta", "measured": {"factor": ["-inf", 0.71], "reduction": 1}})
    assert not matches(beta, {"kind": "beta", "measured": {"factor": [0.45, 0.55]}})
    assert not matches(beta, {"kind": "no-collapse"})
    assert not matches(beta, {"kind": "beta", "measured": {"used": [0, 1]}})
    assert not matches(AssertionError("cut to 0.7"), {"kind": "beta"})


def test_each_kind_is_its_own_class_so_hypothesis_reports_both():
    """Hypothesis tells failures apart by type and raise site; every check raises at
    one site, so two kinds must be two classes or the second is never reported."""
    assert deviation("a", "x").__class__ is deviation("a", "y").__class__
    assert deviation("a", "x").__class__ is not deviation("b", "x").__class__

    @settings(database=None, max_examples=200, derandomize=True)
    @given(st.integers(0, 100))
    def two_bugs(n):
        check(n < 10, "too-big", f"{n} ≥ 10", n=n)
        check(n % 2 == 0 or n < 5, "odd", f"{n} odd", n=n)

    with pytest.raises(BaseExceptionGroup) as caught:
        two_bugs()
    kinds = {e.kind for e in caught.value.exceptions if isinstance(e, Deviation)}
    assert kinds == {"too-big", "odd"}


def test_a_finding_absorbs_only_its_own_deviation():
    finding = (True, "F1: …", {"kind": "beta", "measured": {"factor": [0.65, 0.75]}})
    ok = _settled(deviation("beta", "cut to 0.70", factor=0.70), finding)
    assert ok.skipped and ok.wasxfail
    other = _settled(deviation("beta", "cut to 0.95", factor=0.95), finding)
    assert other.failed and "factor=0.95" in other.sections[-1][1]
    stall = _settled(deviation("transfer-failed", "timed out", reason="timeout"), finding)
    assert stall.failed and "transfer-failed" in stall.sections[-1][1]
    plain = _settled(AssertionError("an assert with no signature"), finding)
    assert plain.failed


def test_a_case_with_two_findings_expects_either_signature():
    both = [{"kind": "window-growth-in-recovery"},
            {"kind": "reduction-without-loss", "measured": {"window": [12520, 12520]}}]
    finding = (True, "F5 … F25", both)
    # F25 resets to aioquic's initial window, whatever the window was (factor 0.04 or 0.40).
    for factor in (0.04, 0.404):
        assert _settled(deviation("reduction-without-loss", "reset", factor=factor, window=12520,
                                  state="CongestionAvoidance"), finding).skipped
    r = _settled(deviation("reduction-without-loss", "cut", factor=0.5, window=15480, state="SlowStart"), finding)
    assert r.failed and "window-growth-in-recovery or reduction-without-loss" in r.sections[-1][1]


def test_a_second_different_deviation_in_a_finding_case_fails_the_run():
    finding = (True, "F1: …", {"kind": "beta", "measured": {"factor": [0.65, 0.75]}})
    both = ExceptionGroup("two", [deviation("beta", "0.7", factor=0.7), deviation("no-collapse", "kept 50 kB")])
    r = _settled(both, finding)
    assert r.failed and "no-collapse" in r.sections[-1][1] and "expected: beta" in r.sections[-1][1]
    same = ExceptionGroup("two", [deviation("beta", "0.7", factor=0.7), deviation("beta", "0.72", factor=0.72)])
    assert _settled(same, finding).skipped


def test_every_finding_has_a_signature_some_check_can_raise():
    raised = set(validate.Mismatch.KINDS)
    for path in (ROOT / "properties").glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            called = getattr(node.func, "id", getattr(node.func, "attr", None)) if isinstance(node, ast.Call) else None
            # check(ok, "kind", …) raises one; deviation("kind", …) builds one to raise with others.
            if called == "check" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                raised.add(node.args[1].value)
            if called == "deviation" and node.args and isinstance(node.args[0], ast.Constant):
                raised.add(node.args[0].value)
    raised.add("transfer-failed")  # Observation.completed()
    for key, signature in findings.SIGNATURES.items():
        for sig in signature if isinstance(signature, list) else [signature]:
            for kind in sig["kind"] if isinstance(sig["kind"], list) else [sig["kind"]]:
                assert kind in raised, f"{key}: signature kind {kind!r} is raised by no check in properties/"


def test_a_bad_signature_is_refused_at_load(tmp_path):
    entry = ('[[finding]]\nproperty = "test_x"\ncase = "aioquic-cubic"\nstrict = true\nreason = "F1: x; docs/findings.md"\n')
    (tmp_path / "none.toml").write_text(entry)
    with pytest.raises(findings.FindingsError, match=r"finding #1 lacks signature"):
        findings.load_all(tmp_path / "none.toml")
    (tmp_path / "range.toml").write_text(entry + 'signature = { kind = "beta", measured = { factor = [0.6] } }\n')
    with pytest.raises(findings.FindingsError, match=r"measured.factor.*\[low, high\]"):
        findings.load_all(tmp_path / "range.toml")
    (tmp_path / "kind.toml").write_text(entry + 'signature = { kinds = "beta" }\n')
    with pytest.raises(findings.FindingsError, match=r"test_x, aioquic-cubic.*signature"):
        findings.load_all(tmp_path / "kind.toml")


def _with_cut_in_slow_start(trace):
    """aioquic CUBIC's real trace (finding F5: growth inside recovery) with one more
    deviation planted before its first loss: the window halved with no loss at all."""
    events = list(trace.events)
    at = next(i for i, e in enumerate(events)
              if isinstance(e, Metrics) and e.congestion_window and e.congestion_window > 40_000)
    e = events[at]
    events.insert(at + 1, Metrics(e.t_us, congestion_window=e.congestion_window // 2))
    events.insert(at + 2, Metrics(e.t_us, congestion_window=e.congestion_window))
    return validate.Trace(trace.stack, trace.vantage, events, trace.source, partial=trace.partial)


@pytest.mark.slow
def test_trace_validation_lists_every_deviation_and_f5_masks_only_its_own():
    from properties.test_model_conformance import deviations

    real = validate.read_ndjson(TRACES / "aioquic-cubic-loss.ndjson", "aioquic")
    strict, reason, signature = True, findings.FINDINGS[F5], findings.SIGNATURES[F5]
    alone = validate.validate(real, "cubic")
    kinds = [m.kind for m in alone.mismatches]
    # One deviation, and its later growths in recovery counted as its repeats.
    assert kinds == ["window-growth-in-recovery"] and len(alone.repeats) >= 2, alone.describe()
    with pytest.raises(BaseException) as caught:
        raise_all(deviations(alone, F5[1]))
    assert _settled(caught.value, (strict, reason, signature)).skipped

    planted = validate.validate(_with_cut_in_slow_start(real), "cubic")
    kinds = list(dict.fromkeys(m.kind for m in planted.mismatches))
    assert kinds[0] == "reduction-without-loss" and "window-growth-in-recovery" in kinds, planted.describe()
    assert re.search(r"REJECTED: \d+ deviation", planted.describe())
    with pytest.raises(BaseExceptionGroup) as caught:
        raise_all(deviations(planted, F5[1]))
    r = _settled(caught.value, (strict, reason, signature))
    assert r.failed and "reduction-without-loss" in r.sections[-1][1]


def test_a_case_under_its_own_and_a_stack_wide_finding_names_the_one_it_met():
    """kwik's bursts property: F68 (its own) and F63 (every property). A stall is
    F63's deviation: the expected failure names F63, not the property's F68."""
    own = {"kind": "burst-beyond-initial-window", "_reason": "F68 (1 of 1 run): bursts; docs/findings.md"}
    wide = {"kind": "transfer-failed", "_reason": "F63 (2 of 5 runs): stalls; docs/findings.md"}
    finding = (False, "F68 (1 of 1 run): bursts; and for every property: F63 ...", [own, wide])
    r = _settled(deviation("transfer-failed", "client exited with 1"), finding)
    assert r.skipped and r.wasxfail.startswith("F63")
    r = _settled(ExceptionGroup("two", [deviation("transfer-failed", "x"), deviation("burst-beyond-initial-window", "y")]),
                 finding)
    assert r.skipped and r.wasxfail.startswith("F68") and "F63" in r.wasxfail
