"""How the pytest plugin places cases in time: under --mode auto (the default) a
case runs in virtual time where its stack and property allow it and in real time
otherwise; under --mode virtual the real-time-only cases are skipped with their
reason. A failure found in virtual time is replayed in real time so the report says
whether it reproduced there (docs/virtual-time.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

#: A real-time replay runs one transfer plus pytest's start-up; bound it, s.
RECHECK_TIMEOUT_S = 600


#: On each collected item: the mode its examples are asked for ("real", "virtual",
#: or "auto": virtual time unless an example's plan needs the kernel).
MODE = pytest.StashKey[str]()


def real_time_reason(item: pytest.Item) -> str | None:
    """Why `item` needs real time (its real_time_only marker, or a stack with no
    virtual backend), decided before any example runs; None if it need not."""
    from harness import virtual
    from harness.schedule.plan import TransferPlan

    marker = item.get_closest_marker("real_time_only")
    if marker is not None:
        return marker.args[0] if marker.args else marker.kwargs.get("reason", "needs real time")
    target = getattr(getattr(item, "callspec", None), "params", {}).get("target")
    if target is None:
        return None
    if getattr(target, "peer", None) is not None:
        return f"a mixed pair ({target.peer.name} receiving) runs in real time"
    why = virtual.supports(target.stack.name)
    if why:
        return why
    # What every example's plan holds (the `plans` marker) and the target's direction
    # decide as harness.run.mode_for will, example by example: said here, a case is
    # placed before it runs, so `--only-mode` can split a run by time.
    fields = item.get_closest_marker("plans")
    plan = TransferPlan(**(fields.kwargs if fields else {}), direction=getattr(target, "direction", "download"))
    try:
        virtual.check_plan(plan, target.stack.name)
    except virtual.RealTimeOnly as e:
        return str(e)
    return None


def choose_modes(items: list[pytest.Item], requested: str) -> None:
    """Stashes each item's mode. Under "virtual", an item that needs real time is
    skipped with its reason (before any example runs, so no time is spent on it);
    under "auto" it runs in real time, and the rest in virtual time."""
    for item in items:
        why = real_time_reason(item) if requested != "real" else None
        if why and requested == "virtual":
            item.add_marker(pytest.mark.skip(reason=f"real time only: {why}"))
        item.stash[MODE] = "real" if why else requested


def keep_only(config: pytest.Config, items: list[pytest.Item], only: str | None) -> None:
    """Under --only-mode, deselects the cases placed in the other time. `make check`
    runs the virtual-time cases two at a time (a virtual clock does not care for a
    shared CPU) and then the real-time ones alone (a real-time verdict does)."""
    if not only:
        return
    placed, other = [], []
    for item in items:
        (placed if (item.stash.get(MODE, "auto") == "real") == (only == "real") else other).append(item)
    config.hook.pytest_deselected(items=other)
    items[:] = placed


def check_placed(mode: str) -> None:
    """Fails the running example if it chose real time in a run of the virtual-time
    cases only (--only-mode virtual): its property's plan needs real time but does
    not say so, and it would run beside another case on a shared CPU."""
    if mode == "real" and os.environ.get("LONGLOOK_ONLY_MODE") == "virtual":
        pytest.fail("this example's plan needs real time, but its case was placed in virtual time and is "
                    "running in the virtual-time pass (--only-mode virtual): declare what its plans hold "
                    "with @pytest.mark.plans(...) on the property (harness/virtual/recheck.py)", pytrace=False)


def judged_in(ledger, item: pytest.Item) -> str:
    """The modes a case's examples ran in ("virtual", "real", "virtual+real"; the
    runner's ledger records them), else the one chosen for it (no example ran)."""
    if ledger is not None and ledger.modes:
        return "+".join(sorted(ledger.modes, reverse=True))
    return item.stash.get(MODE, item.config.getoption("--mode"))


def ran_in_virtual_time(example_dir: Path) -> bool:
    """Whether the example saved in `example_dir` ran in virtual time (its example.json)."""
    import json

    try:
        return json.loads((example_dir / "example.json").read_text()).get("mode") == "virtual"
    except (OSError, ValueError):
        return False


def real_replay_argv(example_dir: Path) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "replay", str(example_dir), "--mode", "real"]


def recheck_section(example_dir: Path, run: bool) -> str:
    """The report lines of a virtual-time failure: the real-time replay command and,
    when `run` and root, whether replaying it in real time reproduced the failure."""
    line = f"real-time replay: longlook replay {example_dir} --mode real"
    if not run:
        return line + "\nreal time: not re-checked (--no-real-recheck)"
    from harness.testbed import rootless

    if not rootless.available():
        return line + f"\nreal time: not re-checked ({rootless.obstacle()})"
    try:
        done = subprocess.run(real_replay_argv(example_dir), capture_output=True, text=True,
                              timeout=RECHECK_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return line + f"\nreal time: not decided (replay exceeded {RECHECK_TIMEOUT_S} s)"
    verdict = replay_verdict(done.stdout + done.stderr)
    (example_dir / "real-time-recheck.txt").write_text(f"{verdict}\n\n{done.stdout}\n{done.stderr}")
    return line + f"\nreal time: {verdict} (output in {example_dir / 'real-time-recheck.txt'})"


def replay_verdict(output: str) -> str:
    """Reads pytest's closing line of a replay: reproduced, not reproduced, or why neither."""
    tail = output.strip().splitlines()[-1:] or [""]
    counts = dict((k, int(n)) for n, k in re.findall(r"(\d+) (failed|passed|skipped|xfailed|xpassed|error)", tail[0]))
    if counts.get("failed") or counts.get("xfailed"):
        return "REPRODUCED (the property fails in real time too)"
    if counts.get("passed") or counts.get("xpassed"):
        return "did not reproduce (the property passes in real time)"
    if counts.get("skipped"):
        return "not decided (the real-time replay was skipped or inconclusive)"
    return f"not decided (replay ended with: {tail[0][:200]!r})"
