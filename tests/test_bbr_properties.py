"""The BBR properties (properties/test_bbr.py) tell a model-based sender from a
loss-based one: a NewReno that calls itself BBR fails each of them, in virtual time,
with the deviation each names, while their judging helpers read the ground truth as
they claim."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from properties import test_bbr as bbr

ROOT = Path(__file__).resolve().parent.parent


def test_refreshes_are_the_datagrams_that_met_an_empty_queue():
    out = [(0.0, 1500, 0), (1e6, 1500, 90_000), (2e6, 1500, bbr.EMPTY_QUEUE), (3e6, 1500, bbr.EMPTY_QUEUE + 1)]
    assert bbr.refreshes(out) == [0.0, 2e6]


def test_second_half_starts_at_half_the_bytes():
    out = [(float(i), 1000, 0) for i in range(10)]
    assert bbr._second_half(out)[0][0] == 4.0


@pytest.mark.slow
def test_a_newreno_calling_itself_bbr_fails_every_bbr_property(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "properties/test_bbr.py", "--impl", "aioquic",
         "--cc", "tests.mutants.reno_called_bbr:RenoCalledBbr", "--mode", "virtual", "--no-real-recheck",
         "--hypothesis-profile", "ci", "--artifacts", str(tmp_path), "-p", "no:cacheprovider", "-q"],
        cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and re.search(r"\b3 failed\b", r.stdout), out[-3000:]
    for kind in ("standing-queue", "no-probe-rtt", "loss-collapse"):
        assert f"[deviation: {kind}]" in out, f"{kind} not raised:\n{out[-3000:]}"
