"""Runner's artifact keeping: a failure keeps what is needed to read and replay it,
a pass keeps nothing, and a verdict drawn across runs keeps all of its runs."""

from __future__ import annotations

import pytest
from hypothesis.errors import UnsatisfiedAssumption

from harness.endpoints import load
from harness.run import Inconclusive, Target
from harness.schedule import LinkSettings, Schedule, TransferPlan
from harness.verdict import runner as runner_mod
from harness.verdict.outcomes import NotExercised, Undecided, not_exercised
from harness.verdict.runner import Runner

SCHEDULE = Schedule.constant(0, LinkSettings(rate_bps=5_000_000, delay_us=10_000))
PLAN = TransferPlan(sizes=(1000,))


@pytest.fixture
def runner(tmp_path, monkeypatch):
    """A Runner whose transfers only leave a marker file: what is kept is the point here."""

    def fake_run(example, target, out):
        (out / "link.ndjson").write_text("{}\n")
        return object()

    monkeypatch.setattr(runner_mod, "run_example", fake_run)
    return Runner(tmp_path)


@pytest.fixture
def node(request):
    """The runner keys failures by the running test's node id, as under properties/."""
    return request.node.nodeid


@pytest.fixture
def target_():
    stack = load("aioquic")
    return Target(stack, stack.cc[stack.default_cc])


def example_dirs(r: Runner):
    return sorted(p.parent for p in r.artifacts.rglob("example.json"))


def test_a_passing_run_keeps_nothing(runner, target_):
    with runner.run(target_, SCHEDULE, PLAN):
        pass
    assert example_dirs(runner) == []


def test_a_failing_run_is_kept_with_its_verdict(runner, target_, node):
    with pytest.raises(AssertionError):
        with runner.run(target_, SCHEDULE, PLAN):
            raise AssertionError("window below the floor")
    [kept] = example_dirs(runner)
    assert runner.kept[node][-1] == kept
    assert "window below the floor" in (kept / "verdict.txt").read_text()


def test_a_later_failure_replaces_the_earlier_one(runner, target_):
    """Shrinking fails many examples: only the last, minimal one stays."""
    for message in ("first", "shrunk"):
        with pytest.raises(AssertionError):
            with runner.run(target_, SCHEDULE, PLAN):
                raise AssertionError(message)
    [kept] = example_dirs(runner)
    assert (kept / "verdict.txt").read_text().strip().endswith("shrunk")


def test_a_verdict_across_passing_runs_keeps_every_run_when_it_fails(runner, target_, node):
    with pytest.raises(AssertionError):
        with runner.together():
            for _ in range(3):
                with runner.run(target_, SCHEDULE, PLAN):
                    pass
            raise AssertionError("×[1.63, 1.58, 1.50] its fair share")
    kept = example_dirs(runner)
    assert len(kept) == 3 and runner.kept[node] == kept
    assert all("fair share" in (d / "verdict.txt").read_text() for d in kept)


def test_a_run_that_fails_inside_a_verdict_keeps_the_runs_before_it(runner, target_):
    with pytest.raises(AssertionError):
        with runner.together():
            with runner.run(target_, SCHEDULE, PLAN):
                pass  # the kernel TCP baseline
            with runner.run(target_, SCHEDULE, PLAN):
                raise AssertionError("×6 slower than TCP")
    assert len(example_dirs(runner)) == 2


def test_a_verdict_that_holds_keeps_nothing(runner, target_, node):
    with runner.together():
        for _ in range(3):
            with runner.run(target_, SCHEDULE, PLAN):
                pass
    assert example_dirs(runner) == [] and node not in runner.kept


@pytest.mark.parametrize("leave", [pytest.skip.Exception("inconclusive"), UnsatisfiedAssumption()])
def test_a_skipped_or_rejected_verdict_keeps_nothing(runner, target_, node, leave):
    with pytest.raises(type(leave)):
        with runner.together():
            with runner.run(target_, SCHEDULE, PLAN):
                pass
            raise leave
    assert example_dirs(runner) == [] and node not in runner.kept


def test_an_inconclusive_run_inside_a_verdict_is_rejected_and_keeps_nothing(runner, target_, node):
    """Not a skip (which would end the property, a failure found before included):
    a rejection Hypothesis goes on from, recorded, and no verdict is counted."""
    with pytest.raises(Undecided, match="CPU-bound"):
        with runner.together():
            with runner.run(target_, SCHEDULE, PLAN):
                pass
            with runner.run(target_, SCHEDULE, PLAN):
                raise Inconclusive("CPU-bound")
    assert example_dirs(runner) == []
    assert runner.ledgers[node].judged == 0 and runner.ledgers[node].inconclusive == ["CPU-bound"]
    assert runner.ledgers[node].outcome() == ("inconclusive", "CPU-bound")


def test_a_verdict_across_runs_counts_once(runner, target_, node):
    with runner.together():
        for _ in range(3):
            with runner.run(target_, SCHEDULE, PLAN):
                pass
    assert runner.ledgers[node].judged == 1 and runner.ledgers[node].outcome() is None


def test_an_example_that_never_triggers_the_property_is_not_exercised(runner, target_, node):
    with pytest.raises(NotExercised):
        with runner.run(target_, SCHEDULE, PLAN):
            not_exercised("no window reduction")
    assert runner.ledgers[node].outcome() == ("not exercised", "no window reduction")
    with runner.run(target_, SCHEDULE, PLAN):
        pass
    assert runner.ledgers[node].outcome() is None
    assert "1 example(s) judged; 1 not exercised (no window reduction)" == runner.ledgers[node].notes()


def test_a_new_failing_verdict_replaces_every_run_of_the_previous_one(runner, target_):
    for runs in (3, 1):
        with pytest.raises(AssertionError):
            with runner.together():
                for _ in range(runs):
                    with runner.run(target_, SCHEDULE, PLAN):
                        pass
                raise AssertionError("over the bound")
    assert len(example_dirs(runner)) == 1


def test_keep_passing_keeps_passing_runs(tmp_path, monkeypatch, target_):
    monkeypatch.setattr(runner_mod, "run_example", lambda example, target, out: object())
    r = Runner(tmp_path, keep_passing=True)
    with r.together():
        with r.run(target_, SCHEDULE, PLAN):
            pass
    assert len(example_dirs(r)) == 1


def test_a_passing_test_leaves_no_empty_directory(runner, target_):
    with runner.run(target_, SCHEDULE, PLAN):
        pass
    assert list(runner.artifacts.iterdir()) == []


def test_keep_passing_keeps_every_failing_example_too(tmp_path, monkeypatch, target_):
    """Shrinking replaces a failing example by a smaller one; with --keep-passing
    every one stays, so a failure that shrinking lost can still be read."""
    monkeypatch.setattr(runner_mod, "run_example", lambda example, target, out: object())
    r = Runner(tmp_path, keep_passing=True)
    for _ in range(3):
        with pytest.raises(AssertionError):
            with r.run(target_, SCHEDULE, PLAN):
                raise AssertionError("over the bound")
    assert len(example_dirs(r)) == 3
