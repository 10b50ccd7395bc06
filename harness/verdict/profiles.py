"""The Hypothesis profile in force, as the properties see it: which cases a slow
property runs, and how many repetitions a statistical one makes. The pytest plugin
sets PROFILE at configure time, before any property module is imported."""

from __future__ import annotations

import os

import pytest
from hypothesis import Phase, settings

#: Real-time bound on shrinking one failure under the ci profile, seconds;
#: $LONGLOOK_SHRINK_SECONDS sets it (read at configure time: shrink_seconds).
CI_SHRINK_SECONDS = 120
#: The Hypothesis profile in force, set at configure time (before test modules load).
PROFILE = "dev"
#: Repetitions of a statistical property per profile (fairness against TCP etc.).
REPETITIONS = {"ci": 3, "dev": 3, "release": 10, "replay": 1}


def slow(test):
    """Marks a property that needs long runs or repetitions. Under the ci profile it
    runs only its fixed @example cases; dev and release also draw schedules.
    Applied above @given; the settings inherit the active profile."""
    test = pytest.mark.slow(test)
    if PROFILE == "ci":
        test = settings(phases=[Phase.explicit])(test)
    return test


def budgeted(examples: int, seconds: float):
    """Under the ci profile, lets a property draw up to `examples` generated examples
    while its generated examples so far took under `seconds` (at least the profile's
    own few: harness/verdict/search.within_budget), so a target that runs in a second
    gets many examples and a slow one the usual few in about the same time. For a
    property whose reach grows with every example (the model's transitions). Other
    profiles keep their own max_examples and no budget. Applied above @given."""

    def wrap(test):
        if PROFILE == "ci":
            test = settings(max_examples=examples)(test)
            test._longlook_budget = float(seconds)
        return test

    return wrap


def repetitions() -> int:
    """How many times a statistical property repeats one case under this profile;
    $LONGLOOK_REPETITIONS overrides it (e.g. to confirm a finding 3 of 3)."""
    override = os.environ.get("LONGLOOK_REPETITIONS")
    if override:
        try:
            return max(int(override), 1)
        except ValueError:
            raise pytest.UsageError(f"LONGLOOK_REPETITIONS={override!r}: give a whole number of runs, e.g. 10") from None
    return REPETITIONS.get(PROFILE, 3)


def shrink_seconds() -> int:
    """The ci profile's shrinking budget: $LONGLOOK_SHRINK_SECONDS, else 120 s."""
    value = os.environ.get("LONGLOOK_SHRINK_SECONDS")
    if value is None:
        return 120
    try:
        return max(int(value), 0)
    except ValueError:
        raise pytest.UsageError(f"LONGLOOK_SHRINK_SECONDS={value!r}: give a whole number of seconds, e.g. 30") from None
