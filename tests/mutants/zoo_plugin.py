"""pytest plugin for the mutant zoo: one JSON line per property verdict.

Loaded by scripts/mutants.py with `-p tests.mutants.zoo_plugin`; writes to the file
named by $LONGLOOK_ZOO_RECORD. Each line holds the test, its outcome (passed,
failed, error, skipped, xfailed, xpassed), its duration, the real time it took to
reach its first failing example, and the minimal failing example's directory.

Time to first failure comes from Hypothesis' run statistics (each test case's
runtime per phase): the explicit examples' time, plus every test case up to the
first failing one. Shrinking is left out: it is the time to a small schedule,
not to the kill. Without statistics (an explicit example failed, so Hypothesis
never started its engine) it is the test's whole duration.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

RECORD_ENV = "LONGLOOK_ZOO_RECORD"
#: Set to 1 to end the session at the first failed property (errors go on: they
#: are no kill, and stopping there would hide a later one).
STOP_ENV = "LONGLOOK_ZOO_STOP_AT_FAILURE"
_EXAMPLE = re.compile(r"minimal failing example: (\S+)")
_PHASES = ("reuse", "generate", "target", "shrink", "explain")


def _time_to_first_failure(stats: dict, duration_s: float) -> float | None:
    """Seconds of real time until the first failing example finished; None if the
    statistics show none (the failure came from an explicit example)."""
    phases = [stats.get(f"{p}-phase") or {} for p in _PHASES]
    in_phases = sum(p.get("duration-seconds", 0.0) for p in phases)
    spent = 0.0
    for phase in phases:
        cases = phase.get("test-cases", [])
        first = next((i for i, c in enumerate(cases) if c.get("status") == "interesting"), None)
        if first is None:
            spent += phase.get("duration-seconds", 0.0)
            continue
        spent += sum(c.get("runtime", 0.0) for c in cases[:first + 1])
        # Outside the phases: the explicit examples before, and Hypothesis'
        # final replay of the minimal example (about one failing run) after.
        replay = cases[first].get("runtime", 0.0)
        return max(duration_s - in_phases - replay, 0.0) + spent
    return None


def _message(report: pytest.TestReport) -> str:
    """The first check's own message, also inside Hypothesis' exception groups: a
    deviation (`Deviation_<kind>: …`, harness/verdict/deviation.py) or an assertion
    (`AssertionError: …`), else pytest's first `E` line, else the last."""
    lines = report.longreprtext.splitlines()
    for line in lines:
        text = line.strip().lstrip("|").strip().removeprefix("E").strip()
        text = text.removeprefix("harness.verdict.deviation.")
        if text.startswith(("AssertionError:", "Deviation_")):
            return text[:400]
    errors = [l[1:].strip() for l in lines if l.startswith("E ")]
    return (errors[0] if errors else (lines or [""])[-1])[:400]


class ZooRecorder:
    def __init__(self, path: str, stop_at_failure: bool):
        self.path = path
        self.stop_at_failure = stop_at_failure
        self.session: pytest.Session | None = None
        self.stats: dict[str, dict] = {}
        self.started: dict[str, float] = {}

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item):
        # Innermost wrapper: this collector wins over the Hypothesis plugin's,
        # which is chained so that --hypothesis-show-statistics still works.
        from hypothesis.statistics import collector

        outer = collector.value

        def note(stats):
            self.stats[item.nodeid] = stats
            if outer is not None:
                outer(stats)

        self.started[item.nodeid] = time.monotonic()
        with collector.with_value(note):
            yield

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            outcome = report.outcome
            if hasattr(report, "wasxfail"):
                outcome = "xfailed" if report.skipped else "xpassed"
        elif report.failed:
            outcome = "error"  # setup or teardown: never a kill
        elif report.when == "setup" and report.skipped:
            outcome = "skipped"
        else:
            return
        example = None
        for _, content in report.sections:
            m = _EXAMPLE.search(content)
            if m:
                example = m.group(1)
        ttff = None
        if outcome == "failed":
            stats = self.stats.get(report.nodeid)
            ttff = _time_to_first_failure(stats, report.duration) if stats else None
            ttff = report.duration if ttff is None else ttff
        record = {
            "nodeid": report.nodeid, "outcome": outcome, "duration_s": round(report.duration, 2),
            "time_to_failure_s": None if ttff is None else round(ttff, 2), "example": example,
            "message": _message(report) if report.failed else None,
        }
        with open(self.path, "a") as fp:
            fp.write(json.dumps(record) + "\n")
        if outcome == "failed" and self.stop_at_failure and self.session is not None:
            self.session.shouldstop = f"zoo: {report.nodeid} failed"


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(RECORD_ENV)
    if path:
        recorder = ZooRecorder(path, os.environ.get(STOP_ENV) == "1")
        config.pluginmanager.register(recorder, "longlook-zoo-recorder")
