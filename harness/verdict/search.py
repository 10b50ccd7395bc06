"""A case with a recorded finding searches on past the finding.

Hypothesis ends its search at the first failing example (and, past the explicit
examples, runs no generated one once an explicit example failed). On a case whose
recorded finding reproduces, that first failure is nearly always the finding itself,
so every later example, and any other deviation it would have shown, went unseen:
the finding masked the rest of the search.

Here an example whose failure is exactly the finding's (every deviation it raised
matches the finding's signature, harness/verdict/deviation.py) is set aside and the
search goes on, as if it had passed; after the last example the examples set aside
are raised together, so the case still ends an expected failure. An example that
fails any other way ends the search as any failure does, and the case fails with it
and with the examples set aside (harness/verdict/outcomes.settle names what did not
match). The artifacts of each set-aside example are kept by the runner as for any
failure; the last one kept names the replay line.

Set-aside examples are not shrunk: the finding's minimal schedule is already in
docs/findings.md, and shrinking a known deviation again would spend the budget the
search needs for the unknown ones.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Iterator

from hypothesis.errors import UnsatisfiedAssumption

from harness.verdict.deviation import matches


def is_the_finding(exc: BaseException, signature) -> bool:
    """Whether every deviation `exc` carries (one, or a group of them) matches the
    finding's signature: only then is the example the finding's, and nothing else."""
    leaves = _leaves(exc)
    return bool(leaves) and all(matches(leaf, signature) for leaf in leaves)


@contextlib.contextmanager
def past_the_finding(test, signature) -> Iterator[list[BaseException]]:
    """While the block runs, examples of `test` (a Hypothesis test function) whose
    failure is the finding's are set aside into the list yielded, and count as
    passed for Hypothesis. Hypothesis calls `.hypothesis.inner_test` for every
    example, explicit or generated, and documents it as the place to wrap; the wrap
    keeps the function's source and signature (functools.wraps), so a derandomised
    profile draws the same examples as without it."""
    hypothesis = getattr(test, "hypothesis", None)
    inner = getattr(hypothesis, "inner_test", None)
    met: list[BaseException] = []
    if inner is None or signature is None:
        yield met
        return

    @functools.wraps(inner)
    def setting_aside(*args, **kwargs):
        try:
            return inner(*args, **kwargs)
        except Exception as e:
            if not is_the_finding(e, signature):
                raise
            met.append(e)
            return None

    hypothesis.inner_test = setting_aside
    try:
        yield met
    finally:
        hypothesis.inner_test = inner


def joined(failure: BaseException | None, met: list[BaseException]) -> BaseException | None:
    """The case's failure: what ended the search (if anything did) with the examples
    set aside before it; None if nothing failed. One set-aside example alone is
    raised as itself."""
    if not met:
        return failure
    if failure is None and len(met) == 1:
        return met[0]
    parts = ([failure] if failure is not None else []) + met
    what = "an example failed another way after" if failure is not None else "examples showed"
    return ExceptionGroup(f"{what} {len(met)} example(s) with the recorded finding's deviation", parts)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


#: Generated examples a budgeted case always runs, whatever its budget: the ci
#: profile's own max_examples, so a budget only ever adds examples.
MIN_GENERATED = 3


@contextlib.contextmanager
def within_budget(test, seconds: float, ledger) -> Iterator[None]:
    """While the block runs, the generated examples of `test` past the first
    MIN_GENERATED run only while the generated ones so far took under `seconds` of
    wall time; each one drawn after that is not run (it counts toward max_examples
    as a pass would, and `ledger.unrun` counts it), so a fast target (a sans-IO stack
    in virtual time, a second a run) gets many examples and a slow one the profile's
    few, in about the same time. Once any example has failed, the budget no longer
    applies: Hypothesis' shrinking and its final replay of a failure must run every
    example they ask for, or a failure would turn flaky."""
    hypothesis = getattr(test, "hypothesis", None)
    inner = getattr(hypothesis, "inner_test", None)
    if inner is None:
        yield
        return
    explicit = len(getattr(test, "hypothesis_explicit_examples", ()))
    calls = 0
    started: float | None = None
    failed = False

    @functools.wraps(inner)
    def budgeted(*args, **kwargs):
        nonlocal calls, started, failed
        calls += 1
        generated = calls - explicit
        if generated == 1:
            started = time.monotonic()
        if (not failed and generated > MIN_GENERATED and started is not None
                and time.monotonic() - started > seconds):
            ledger.unrun += 1
            return None
        try:
            return inner(*args, **kwargs)
        except Exception as e:
            # A rejection (not exercised, inconclusive) is no failure.
            if not isinstance(e, UnsatisfiedAssumption):
                failed = True
            raise

    hypothesis.inner_test = budgeted
    try:
        yield
    finally:
        hypothesis.inner_test = inner
