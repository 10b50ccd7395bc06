"""Issue 27: outcomes that tell the truth. A property judges what a run shows or says
it was not exercised or inconclusive; a recorded finding expects only the failure it
describes; a strict finding's case that is skipped or undecided fails."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest
from hypothesis.errors import Unsatisfiable

from harness.verdict.outcomes import Ledger, settle, status_of

ROOT = Path(__file__).resolve().parent.parent


def _report(outcome: str, wasxfail: str | None = None, longrepr=None):
    r = types.SimpleNamespace(outcome=outcome, when="call", location=("properties/test_x.py", 9, "test_x"),
                              longrepr=longrepr, sections=[])
    r.passed, r.failed, r.skipped = outcome == "passed", outcome == "failed", outcome == "skipped"
    if wasxfail is not None:
        r.wasxfail = wasxfail
    return r


def _call(exc: BaseException | None = None):
    return types.SimpleNamespace(excinfo=types.SimpleNamespace(value=exc) if exc else None)


def _refresh(r):
    r.passed, r.failed, r.skipped = r.outcome == "passed", r.outcome == "failed", r.outcome == "skipped"
    return r


def test_a_case_with_no_example_judged_is_inconclusive_not_passed():
    r = _report("passed")
    settle(r, _call(), Ledger(inconclusive=["aioquic server waited 1.2 s for a CPU"]), None)
    assert _refresh(r).skipped and r.longrepr[2].startswith("inconclusive: aioquic server waited")
    assert status_of(r) == ("inconclusive", "I", "INCONCLUSIVE")


def test_a_case_whose_trigger_never_happened_is_not_exercised():
    r = _report("passed")
    settle(r, _call(), Ledger(not_exercised=["no window reduction"]), None)
    assert _refresh(r).skipped and status_of(r)[0] == "not exercised"


def test_hypothesis_finding_nothing_to_run_is_the_same():
    r = _report("failed", longrepr="Unsatisfiable")
    settle(r, _call(Unsatisfiable("x")), Ledger(inconclusive=["no readable qlog"]), None)
    assert _refresh(r).skipped and status_of(r)[0] == "inconclusive"


def test_a_judged_case_stays_passed_with_a_note():
    r = _report("passed")
    settle(r, _call(), Ledger(judged=2, inconclusive=["busy"]), None)
    assert _refresh(r).passed and status_of(r) is None and "2 example(s) judged" in r.sections[0][1]


def test_a_strict_finding_that_was_not_judged_fails():
    r = _report("passed")
    settle(r, _call(), Ledger(inconclusive=["busy"]), (True, "F1: …"))
    assert _refresh(r).failed and "strict finding" in r.longrepr


def test_a_strict_finding_that_was_skipped_fails():
    r = _report("skipped", longrepr=("p", 1, "capability: quiche logs no packet lost"))
    settle(r, _call(), Ledger(), (True, "F3: …"))
    assert _refresh(r).failed and "skipped: capability" in r.longrepr


def test_a_skip_in_an_explicit_example_keeps_its_reason_alone():
    # Hypothesis notes the explicit example (every argument's repr) on whatever it
    # raised, a skip included; no example failed, so the summary shows the reason.
    note = "\nFailing explicit example: test_x(\n    target=Target(stack=Stack(name='aioquic', ...)),\n)"
    r = _report("skipped", longrepr=("properties/test_x.py", 10, "not applicable: a rule of the bbr family" + note))
    settle(r, _call(), None, None)
    assert _refresh(r).skipped and r.longrepr == ("properties/test_x.py", 10, "not applicable: a rule of the bbr family")
    r2 = _report("skipped", longrepr=("p", 1, "capability: quiche logs no packet lost" + note))
    settle(r2, _call(), Ledger(), (True, "F3: …"))
    assert _refresh(r2).failed and r2.longrepr.endswith("skipped: capability: quiche logs no packet lost")


def test_a_finding_expects_an_assertion_not_any_exception():
    r = _report("skipped", wasxfail="F1: …", longrepr="TypeError: …")
    settle(r, _call(TypeError("bug in the property")), Ledger(judged=1), (True, "F1: …"))
    assert _refresh(r).failed and not hasattr(r, "wasxfail") and "TypeError" in r.sections[0][1]
    # Several failures at once (Hypothesis' group): every one must be an assertion.
    r2 = _report("skipped", wasxfail="F1: …", longrepr="group")
    group = ExceptionGroup("two", [AssertionError("cut to 0.7"), KeyError("x")])
    settle(r2, _call(group), Ledger(judged=1), (False, "F1: …"))
    assert _refresh(r2).failed
    r3 = _report("skipped", wasxfail="F1: …", longrepr="AssertionError")
    settle(r3, _call(ExceptionGroup("two", [AssertionError("a"), AssertionError("b")])), Ledger(judged=1), (True, "F1"))
    assert _refresh(r3).skipped and r3.wasxfail


def test_a_real_time_failure_the_replay_did_not_repeat_is_matched_by_what_failed():
    # Hypothesis's FlakyFailure after a real-time failure holds the replay's outcome
    # (here: not exercised), not the deviation: the runner's record of what failed is
    # what the finding's signature is matched against.
    from harness.verdict.deviation import deviation
    from harness.verdict.outcomes import NotExercised
    from hypothesis.errors import FlakyFailure

    signature = {"kind": "probes-not-in-flight", "measured": {"unexplained": [-1252, 2504]}}
    flaky = FlakyFailure("Inconsistent results from replaying a test case!", [NotExercised("no report")])
    match = deviation("probes-not-in-flight", "4659 B below", unexplained=349)
    r = _report("skipped", wasxfail="F26: …", longrepr="FlakyFailure")
    settle(r, _call(flaky), Ledger(judged=3, failures=[match]), (False, "F26: …", signature))
    assert _refresh(r).skipped and r.wasxfail
    # The same replay after a failure outside the signature: the case fails.
    other = deviation("probes-not-in-flight", "probes left out", unexplained=-2504)
    r2 = _report("skipped", wasxfail="F26: …", longrepr="FlakyFailure")
    settle(r2, _call(flaky), Ledger(judged=3, failures=[match, other]), (False, "F26: …", signature))
    assert _refresh(r2).failed and "unexplained=-2504" in r2.sections[0][1]
    # A rejection is never taken for a failure that matches: with nothing recorded
    # either, the group itself is what failed.
    r3 = _report("skipped", wasxfail="F26: …", longrepr="FlakyFailure")
    settle(r3, _call(flaky), Ledger(judged=3), (False, "F26: …", signature))
    assert _refresh(r3).failed


@pytest.mark.slow
def test_two_cuts_without_loss_fail_the_one_reduction_property(tmp_path):
    """The planted controller of issue 27 (tests/mutants/cuts_without_loss.py) fails,
    in virtual time, the property that used to skip it."""
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "properties/test_window.py::test_one_window_reduction_per_recovery_period",
         "--impl", "aioquic", "--cc", "tests.mutants.cuts_without_loss:CutsWithoutLoss", "--mode", "virtual",
         "--no-real-recheck", "--hypothesis-profile", "ci", "--artifacts", str(tmp_path), "-p", "no:cacheprovider",
         "-q"], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "1 failed" in r.stdout, out[-3000:]
    assert "was of a packet sent before that recovery began" in out and "SKIPPED" not in out


def test_a_case_whose_every_run_is_inconclusive_ends_after_a_short_streak():
    """Inconclusive examples are rejections, so Hypothesis draws on (a failure already
    found stays one). Past outcomes.INCONCLUSIVE_STREAK in a row, none judged, each
    further one counts toward max_examples: a case whose runs all fail to be judged
    for one reason ends in STREAK + max_examples calls, not hundreds, and its ledger
    says inconclusive. A judged example starts the streak over."""
    from hypothesis import given, settings, strategies as st

    from harness.pytest_plugin import _count_unjudged
    from harness.verdict.outcomes import INCONCLUSIVE_STREAK, undecided

    ledger, calls = Ledger(), []

    @settings(max_examples=3, database=None, deadline=None)
    @given(st.integers())
    def always_inconclusive(n):
        calls.append(n)
        raise undecided(ledger, "the server's wire view is incomplete")

    _count_unjudged(always_inconclusive)
    always_inconclusive()
    assert len(calls) == INCONCLUSIVE_STREAK + 3 and ledger.judged == 0
    assert ledger.outcome() == ("inconclusive", "the server's wire view is incomplete")
    # A judged example in between: the streak starts over.
    ledger = Ledger(streak=INCONCLUSIVE_STREAK)
    assert undecided(ledger, "x").counts
    ledger.streak = 0  # what the runner does when an example is judged
    assert not undecided(ledger, "x").counts
