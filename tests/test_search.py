"""A case with a recorded finding searches on past it (harness/verdict/search.py): an
example that shows only the finding's deviation does not end Hypothesis' search, so a
later example's different deviation is found, and the case still ends an expected
failure when nothing else turned up."""

from __future__ import annotations

import time
import types

import pluggy
import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from harness import pytest_plugin as plugin
from harness.verdict import search
from harness.verdict.deviation import check, deviation
from harness.verdict.outcomes import Ledger, settle

FINDING = (True, "F1: a cut to 0.7", {"kind": "beta", "measured": {"factor": [0.65, 0.75]}})


def _property(seen: list[int], other_from: int | None):
    """Every example shows the finding (a cut to 0.7); from `other_from` on, one also
    shows another deviation. The explicit example shows the finding alone."""

    @settings(database=None, max_examples=40, derandomize=True, phases=[Phase.explicit, Phase.generate])
    @example(n=1)
    @given(n=st.integers(0, 50))
    def prop(n):
        seen.append(n)
        check(other_from is None or n < other_from, "no-collapse", f"kept {n} kB", kept=n)
        check(False, "beta", "cut to 0.70", factor=0.70)

    return prop


def _run_as_the_plugin_does(test, finding=FINDING):
    """The plugin's call hook around a call of `test`, as pluggy drives a hookwrapper."""
    item = types.SimpleNamespace(stash=pytest.Stash(), obj=test)
    item.stash[plugin.FINDING] = finding
    hook = plugin.pytest_runtest_call(item)
    next(hook)
    result = pluggy.Result.from_call(test)
    with pytest.raises(StopIteration):
        hook.send(result)
    return result.exception


def _settled(exc: BaseException):
    report = types.SimpleNamespace(outcome="skipped", when="call", location=("properties/test_x.py", 9, "test_x"),
                                   longrepr="Deviation", sections=[], wasxfail=FINDING[1], passed=False,
                                   failed=False, skipped=True)
    settle(report, types.SimpleNamespace(excinfo=types.SimpleNamespace(value=exc)), Ledger(judged=1), FINDING)
    return report.outcome


def test_without_the_search_the_explicit_example_hides_the_rest():
    """What the mechanism mends: Hypothesis runs no generated example once an explicit
    one failed, so the case's second deviation is never looked for."""
    seen: list[int] = []
    with pytest.raises(AssertionError):
        _property(seen, other_from=25)()
    assert seen == [1]


def test_the_search_goes_on_past_the_finding_and_finds_the_other_deviation():
    seen: list[int] = []
    exc = _run_as_the_plugin_does(_property(seen, other_from=25))
    assert len(seen) > 1 and any(n >= 25 for n in seen)
    kinds = {getattr(e, "kind", None) for e in search._leaves(exc)}
    assert {"beta", "no-collapse"} <= kinds
    # The examples set aside keep the finding's expected failure apart from the new one:
    # the case fails, naming the deviation the finding does not describe.
    assert _settled(exc) == "failed"


def test_a_case_with_only_the_finding_runs_every_example_and_stays_an_expected_failure():
    seen: list[int] = []
    exc = _run_as_the_plugin_does(_property(seen, other_from=None))
    assert len(seen) > 10  # every generated example ran: none ended the search
    assert search.is_the_finding(exc, FINDING[2])
    assert _settled(exc) == "skipped"


def test_a_failure_of_another_kind_is_not_set_aside():
    group = ExceptionGroup("two", [deviation("beta", "0.7", factor=0.7), deviation("no-collapse", "kept")])
    assert not search.is_the_finding(group, FINDING[2])
    assert not search.is_the_finding(deviation("beta", "0.95", factor=0.95), FINDING[2])
    assert not search.is_the_finding(TypeError("a harness bug"), FINDING[2])
    assert search.is_the_finding(ExceptionGroup("one", [deviation("beta", "0.7", factor=0.7)]), FINDING[2])


def test_the_wrap_is_undone_and_draws_the_same_examples():
    """The wrap keeps the function's source and signature: a derandomised profile draws
    what it draws without it (the ci profile's examples stay the same)."""

    def passing(seen: list[int]):
        @settings(database=None, max_examples=20, derandomize=True)
        @given(n=st.integers(0, 10_000))
        def prop(n):
            seen.append(n)

        return prop

    plain: list[int] = []
    wrapped: list[int] = []
    passing(plain)()
    test = passing(wrapped)
    inner = test.hypothesis.inner_test
    with search.past_the_finding(test, FINDING[2]) as met:
        test()
    assert test.hypothesis.inner_test is inner and met == []
    assert len(plain) >= 20 and plain == wrapped


def test_joined_keeps_what_ended_the_search_first():
    a, b = deviation("beta", "0.7", factor=0.7), deviation("beta", "0.71", factor=0.71)
    other = deviation("no-collapse", "kept")
    assert search.joined(None, []) is None and search.joined(other, []) is other
    assert search.joined(None, [a]) is a
    assert search.joined(None, [a, b]).exceptions == (a, b)
    assert search.joined(other, [a]).exceptions == (other, a)


def _timed_property(seen: list[int], seconds_each: float, fail_at: int | None = None, examples: int = 30):
    @settings(database=None, max_examples=examples, derandomize=True, phases=[Phase.explicit, Phase.generate])
    @example(n=-1)
    @given(n=st.integers(0, 10_000))
    def prop(n):
        seen.append(n)
        time.sleep(seconds_each)
        check(fail_at is None or len(seen) < fail_at, "no-collapse", f"kept {n} kB", kept=n)

    return prop


def test_a_budget_runs_the_profiles_few_then_stops_drawing_runs():
    seen: list[int] = []
    ledger = Ledger()
    test = _timed_property(seen, 0.05)
    with search.within_budget(test, 0.12, ledger):
        test()
    generated = len(seen) - 1
    # At least the profile's few; then runs while the generated ones took under 0.12 s
    # (the fourth starts at about 0.15 s): the other draws were not run, and counted.
    assert generated == search.MIN_GENERATED
    assert ledger.unrun == 30 - generated
    assert "drawn but not run" in Ledger(judged=3, not_exercised=["x"], unrun=ledger.unrun).notes()


def test_a_budget_lets_fast_examples_all_run():
    seen: list[int] = []
    ledger = Ledger()
    test = _timed_property(seen, 0.0)
    with search.within_budget(test, 30.0, ledger):
        test()
    assert len(seen) - 1 == 30 and ledger.unrun == 0


def test_after_a_failure_the_budget_never_skips_an_example():
    """Shrinking and Hypothesis' final replay must run what they ask for: a budget that
    skipped the replay would pass it, and the failure would turn flaky."""
    seen: list[int] = []
    bad: list[int] = []

    @settings(database=None, max_examples=30, derandomize=True, phases=[Phase.explicit, Phase.generate])
    @example(n=-1)
    @given(n=st.integers(0, 10_000))
    def prop(n):
        seen.append(n)
        time.sleep(0.05)
        if len(seen) == 1 + search.MIN_GENERATED:
            bad.append(n)  # the last example the budget lets run fails, past the budget
        check(n not in bad, "no-collapse", f"kept {n} kB", kept=n)

    ledger = Ledger()
    with search.within_budget(prop, 0.06, ledger), pytest.raises(AssertionError) as caught:
        prop()
    assert "Flaky" not in type(caught.value).__name__ and seen.count(bad[0]) >= 2
