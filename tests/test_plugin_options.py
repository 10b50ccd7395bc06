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


def _ids(*args: str) -> set[str]:
    argv = [sys.executable, "-m", "pytest", "properties/test_fairness.py", "properties/test_window.py",
            "--collect-only", "-q", "-p", "no:cacheprovider", *args]
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode in (0, 5), r.stdout + r.stderr
    return {line for line in r.stdout.splitlines() if "::" in line}


def test_only_mode_splits_a_run_by_time_and_loses_no_case():
    """`make check`'s two passes: each case in exactly one of them, the kernel's
    properties and a plan of two connections on aioquic (one connection in its
    virtual backend) in the real-time one, the rest in the virtual-time one."""
    every = _ids("--impl", "aioquic,quinn", "--cc", "newreno")
    virtual = _ids("--impl", "aioquic,quinn", "--cc", "newreno", "--only-mode", "virtual")
    real = _ids("--impl", "aioquic,quinn", "--cc", "newreno", "--only-mode", "real")
    assert virtual | real == every and not virtual & real, (virtual, real)
    assert any("test_fair_share_against_tcp" in i for i in real)
    assert not any("test_fair_share_against_tcp" in i for i in virtual)
    shared = "properties/test_fairness.py::test_quic_flows_share_fairly"
    assert f"{shared}[aioquic-newreno]" in real and f"{shared}[quinn-newreno]" in virtual, (virtual, real)
    assert any("test_window.py" in i and "aioquic" in i for i in virtual)


def test_only_mode_needs_auto():
    r = _collect("--impl", "aioquic", "--mode", "real", "--only-mode", "virtual")
    out = r.stdout + r.stderr
    assert r.returncode == 4 and "ERROR: --only-mode virtual splits the cases --mode auto places" in out, out


def test_an_undeclared_real_time_plan_fails_in_the_virtual_pass(monkeypatch):
    """The guard behind the split: an example that chooses real time while only the
    virtual-time cases run fails and says how to declare its plan."""
    from harness.virtual.recheck import check_placed

    monkeypatch.setenv("LONGLOOK_ONLY_MODE", "virtual")
    check_placed("virtual")
    with pytest.raises(pytest.fail.Exception, match=r"declare what its plans hold with @pytest.mark.plans"):
        check_placed("real")
    monkeypatch.setenv("LONGLOOK_ONLY_MODE", "real")
    check_placed("real")
