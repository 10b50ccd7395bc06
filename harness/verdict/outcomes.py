"""Outcomes that tell the truth: beside passed and failed, a property's case can be
*not exercised* (its trigger never happened in any example) or *inconclusive* (no
example could be judged: an endpoint starved of CPU, an unreadable capture), and
neither may pass for a pass or hide a failure.

- An example the run cannot decide raises ``Undecided`` and one whose trigger never
  happened raises ``NotExercised``; both are Hypothesis rejections, so Hypothesis goes
  on with the next example and a failure already found stays a failure (a
  ``pytest.skip`` would end the whole property, during shrinking too).
- The ``Ledger`` of each test counts the examples judged, and the reasons of those
  that were not; the pytest plugin turns a case with no example judged into its own
  outcome, ``inconclusive`` or ``not exercised``, never "passed".
- A skip is decided before the run, from what cannot change between runs: a
  capability the stack lacks (its dialect's ``LOGS``), a rule that does not apply to
  the controller's family, a mode that cannot run the case. ``SKIP_REASONS`` are the
  allowed prefixes; tests/test_outcomes_meta.py keeps every skip in properties/ so.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterator

import pytest
from hypothesis.errors import UnsatisfiedAssumption

from harness.observe import dialects
from harness.verdict.deviation import Deviation, deviation, matches

#: The only reasons a property may be skipped for, as the prefix of its message.
SKIP_REASONS = ("capability:", "not applicable:", "real time only:")


class Undecided(UnsatisfiedAssumption):
    """The example could not be judged (the run was inconclusive): rejected, recorded.
    `counts`: past INCONCLUSIVE_STREAK of them in a row, it counts toward max_examples
    (harness/pytest_plugin.py), so that a case whose every run is inconclusive for one
    reason ends in a few examples, "inconclusive", instead of Hypothesis drawing
    hundreds of runs (a release whose capture cannot be read took 10-15 min a case)."""

    counts = False


#: Inconclusive examples in a row, none judged in between, after which each further
#: one counts toward max_examples. Above the ci profile's examples, so a case with
#: some judgeable runs still gets them; far below Hypothesis' own limit on rejections.
INCONCLUSIVE_STREAK = 10


class NotExercised(UnsatisfiedAssumption):
    """The property's trigger never happened in this example: rejected, recorded."""


@dataclass
class Ledger:
    """What the examples of one test came to."""

    judged: int = 0
    inconclusive: list[str] = field(default_factory=list)
    not_exercised: list[str] = field(default_factory=list)
    #: Inconclusive examples since the last judged one (Undecided.counts).
    streak: int = 0
    #: The modes its examples ran in ("virtual", "real"): with --mode auto a case
    #: may run some of them in each.
    modes: set[str] = field(default_factory=set)
    #: What failed each failing example (a Deviation or any other exception), as the
    #: runner caught it: a real-time failure that Hypothesis's replay did not repeat
    #: reaches pytest as a FlakyFailure holding only the replay's outcome.
    failures: list[BaseException] = field(default_factory=list)
    #: Examples drawn but not run: the case's time budget was spent (profiles.budgeted).
    unrun: int = 0

    def record_failure(self, e: BaseException) -> None:
        """Keeps what failed an example, leaf by leaf, as fresh exceptions: the
        caught one's traceback holds the run's observation (capture, logs) alive."""
        for leaf in _leaves(e):
            if isinstance(leaf, Deviation):
                kept = deviation(leaf.kind, leaf.args[0] if leaf.args else "", **leaf.measured)
            elif isinstance(leaf, AssertionError):
                kept = AssertionError(str(leaf))
            else:
                kept = RuntimeError(f"{type(leaf).__name__}: {leaf}")
            self.failures.append(kept)

    def outcome(self) -> tuple[str, str] | None:
        """("inconclusive" | "not exercised", why) when no example was judged, else None."""
        if self.judged:
            return None
        if self.inconclusive:
            return "inconclusive", _summary(self.inconclusive)
        if self.not_exercised:
            return "not exercised", _summary(self.not_exercised)
        return None

    def notes(self) -> str:
        """A line for a judged case some of whose examples were not."""
        parts = []
        if self.inconclusive:
            parts.append(f"{len(self.inconclusive)} inconclusive ({_summary(self.inconclusive)})")
        if self.not_exercised:
            parts.append(f"{len(self.not_exercised)} not exercised ({_summary(self.not_exercised)})")
        if self.unrun:
            parts.append(f"{self.unrun} drawn but not run (the case's time budget was spent)")
        return f"{self.judged} example(s) judged; " + "; ".join(parts) if parts else ""


def _summary(reasons: list[str]) -> str:
    distinct = list(dict.fromkeys(reasons))
    more = f" (+{len(distinct) - 2} other reasons)" if len(distinct) > 2 else ""
    return "; ".join(distinct[:2]) + more


def undecided(ledger: Ledger, why: str) -> Undecided:
    """The rejection for an inconclusive example, recorded in `ledger`."""
    ledger.inconclusive.append(why)
    ledger.streak += 1
    e = Undecided(why)
    e.counts = ledger.streak > INCONCLUSIVE_STREAK
    return e


def not_exercised(reason: str) -> None:
    """Ends the example: its run never triggered what the property judges."""
    raise NotExercised(reason)


@contextlib.contextmanager
def rare_trigger() -> Iterator[None]:
    """Around the run of a property whose trigger depends on the peer's habits more
    than on the schedule (most draws never show it): an example that did not
    exercise it is recorded in the ledger as usual but counts toward max_examples,
    so Hypothesis does not hunt through hundreds of runs for one that does (its
    filter_too_much health check would end the case as an error). A case with no
    example judged still ends "not exercised", never passed."""
    try:
        yield
    except NotExercised:
        pass


def require(target, capability: str) -> None:
    """Skips the property, before anything runs, when the target's stack cannot log
    `capability` (harness.observe.dialects.CAPABILITIES) whatever a run does."""
    stack = target.stack
    if not dialects.of_stack(stack.name, bool(stack.honours.get("qlog"))).logs(capability):
        pytest.skip(f"capability: {stack.name} logs no {capability.replace('_', ' ')}")


def not_applicable(reason: str) -> None:
    """Skips a rule that does not apply to the target (e.g. its family has no β)."""
    pytest.skip(f"not applicable: {reason}")


def require_own_client(target) -> None:
    """Skips a rule of the client's when the run's client is not the target's own
    stack: a peer's client, or the target itself sending in an upload."""
    if target.peer is not None or target.direction != "download":
        not_applicable("judged on the target's own client in a download; here the client is another stack's "
                       "or the sender")


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


def settle(report, call, ledger: Ledger | None, finding: tuple[bool, str] | None) -> None:
    """Gives a property's call-phase report the outcome its examples earned.

    - No example judged (all inconclusive or not exercised, or Hypothesis found none
      it could run): that outcome, never "passed", and a failure where a strict
      finding expected one.
    - A recorded finding expects the failure it describes: every failure of the case
      must be a deviation matching the finding's signature (its kind and measured
      ranges). A different deviation, a transfer failure, or any other exception (a
      TypeError, a harness error, a TLC timeout) fails the run instead of passing for
      the finding: one finding masks nothing else.
    - A strict finding's case that is skipped fails: the finding cannot be confirmed.
    """
    from hypothesis.errors import Unsatisfiable

    exc = call.excinfo.value if call.excinfo else None
    strict = bool(finding and finding[0])
    xfailed = report.skipped and hasattr(report, "wasxfail")
    if ledger is not None and (report.passed or isinstance(exc, Unsatisfiable)):
        undecided = ledger.outcome()
        if undecided is not None:
            kind, why = undecided
            if strict:
                _fail(report, f"a strict finding expects a failure here, yet no example was judged: {kind}: {why}")
            else:
                _mark(report, kind, why)
            return
    if xfailed and exc is not None:
        signature = finding[2] if finding and len(finding) > 2 else None
        # A rejection (not exercised, inconclusive) is no failure: it is inside the
        # group when Hypothesis's replay of a real-time failure did not fail again. The
        # failures are then the ones the runner caught, each matched like any other.
        leaves = [e for e in _leaves(exc) if not isinstance(e, UnsatisfiedAssumption)]
        if not leaves and ledger is not None:
            leaves = list(ledger.failures)
        if not leaves:
            leaves = [exc]
        others = [e for e in leaves if not (isinstance(e, AssertionError) if signature is None
                                            else matches(e, signature))]
        if others:
            what = "; ".join(dict.fromkeys(_what(e) for e in others))
            expected = f" (expected: {_show(signature)})" if signature is not None else ""
            _fail(report, f"the recorded finding ({finding[1] if finding else report.wasxfail}) describes another "
                          f"deviation{expected}; this case failed with {what}", keep_repr=True)
            return
        # A case under two findings (its own and a stack-wide one): the verdict names
        # the one whose deviation it met.
        met = [one["_reason"] for one in (signature if isinstance(signature, list) else [])
               if "_reason" in one and any(matches(e, one) for e in leaves)]
        if met:
            report.wasxfail = "; ".join(dict.fromkeys(met))
    if report.skipped and not xfailed and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        # A skip raised in an explicit @example (a rule that does not apply, a
        # capability the stack lacks) carries Hypothesis' note "Failing explicit
        # example: …" with every argument's repr: no example failed, so the summary
        # line keeps the reason alone.
        path, line, text = report.longrepr
        report.longrepr = (path, line, text.split("\nFailing explicit example", 1)[0].rstrip())
    if report.skipped and not xfailed and strict:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _fail(report, f"a strict finding expects a failure here, yet the case was skipped: {reason}")
        return
    if report.passed and ledger is not None and ledger.notes():
        report.sections.append(("longlook outcome", ledger.notes()))


def _what(e: BaseException) -> str:
    if isinstance(e, Deviation):
        values = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in e.measured.items())
        return f"the deviation {e.kind}" + (f" ({values})" if values else "")
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def _show(signature) -> str:
    if isinstance(signature, list):
        return " or ".join(_show(one) for one in signature)
    ranges = ", ".join(f"{k} in {v}" for k, v in signature.get("measured", {}).items())
    return f"{signature['kind']}" + (f" with {ranges}" if ranges else "")


def _fail(report, message: str, keep_repr: bool = False) -> None:
    report.outcome = "failed"
    if hasattr(report, "wasxfail"):
        del report.wasxfail
    if keep_repr and report.longrepr is not None and not isinstance(report.longrepr, tuple):
        report.sections.append(("longlook outcome", message))
    else:
        report.longrepr = message


def _mark(report, kind: str, why: str) -> None:
    report.outcome = "skipped"
    if hasattr(report, "wasxfail"):
        del report.wasxfail
    path, line, _ = report.location
    report.longrepr = (str(path), (line or 0) + 1, f"{kind}: {why}")
    report.longlook_outcome = kind


def status_of(report) -> tuple[str, str, str] | None:
    """pytest's (category, letter, word) for our own outcomes, so the summary line
    counts them apart ("3 inconclusive", "1 not exercised"), never as skips."""
    kind = getattr(report, "longlook_outcome", None)
    if kind is None or report.when != "call":
        return None
    return kind, "I" if kind == "inconclusive" else "N", kind.upper()
