"""The plugin's --impl/--cc: several controllers in one run, and a run that can have
no case refused in one line before any property module is collected."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _collect(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "pytest", "properties/test_pacing.py", "--collect-only", "-q",
            "-p", "no:cacheprovider", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def test_several_controllers_separated_by_commas_are_one_case_each():
    r = _collect("--impl", "aioquic", "--cc", "newreno, cubic")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[aioquic-newreno]" in r.stdout and "[aioquic-cubic]" in r.stdout, r.stdout


@pytest.mark.parametrize("args, needle", [
    (["--impl", "aioquic", "--cc", "bbr"], "no stack among ['aioquic'] offers --cc 'bbr'; see `longlook impls`"),
    (["--impl", "nosuch"], "--impl: unknown stack 'nosuch'"),
])
def test_a_run_with_no_case_is_one_line_before_collection(args, needle):
    r = _collect(*args)
    out = r.stdout + r.stderr
    assert r.returncode == 4, out  # pytest's usage error
    assert f"ERROR: {needle}" in out, out
    assert "Traceback" not in out and "ERROR collecting" not in out, out


def test_a_bad_shrinking_budget_is_one_line(monkeypatch):
    monkeypatch.setenv("LONGLOOK_SHRINK_SECONDS", "soon")
    r = _collect("--impl", "aioquic")
    out = r.stdout + r.stderr
    assert r.returncode == 4 and "ERROR: LONGLOOK_SHRINK_SECONDS='soon': give a whole number of seconds" in out, out
    assert "Traceback" not in out, out
