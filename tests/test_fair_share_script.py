"""scripts/fair-share.py: bad input is named before anything runs, and a real run
prints each run's ratio to the fair share and the verdict line."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "fair-share.py"


def run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--artifacts", str(tmp_path / "a"), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, needle", [
    (["--impl", "nosuch"], "--impl nosuch: unknown stack 'nosuch'"),
    (["--cc", "bbr"], "--impl aioquic --cc bbr: aioquic has no congestion control 'bbr'"),
    (["--runs", "0"], "--flows 1 --runs 0: both must be at least 1"),
])
def test_bad_input_names_the_option(args, needle, tmp_path):
    p = run(*args, tmp_path=tmp_path)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "a").exists()


def test_runs_under_the_checkout_venv_whatever_python_starts_it(tmp_path):
    """The README runs it as `scripts/fair-share.py`: its shebang's python3 is the
    system one, without the pinned packages; the script moves itself to .venv."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system is None:
        pytest.skip("no system python3 to start it with")
    p = subprocess.run([system, str(SCRIPT), "--artifacts", str(tmp_path / "a"), "--runs", "0"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--flows 1 --runs 0: both must be at least 1" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_one_run_prints_its_share(netns_ready, tmp_path):
    p = run("--impl", "aioquic", "--cc", "newreno", "--runs", "1", tmp_path=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    ratio = re.search(r"run 1/1: ×([0-9.]+) its fair share", p.stdout)
    assert ratio and 0.2 < float(ratio.group(1)) < 2.0, p.stdout
    assert re.search(r"aioquic-newreno against 1 TCP CUBIC flow\(s\): ×\[[0-9.]+\]; [01] of 1 above ×1.5", p.stdout)
    assert list((tmp_path / "a").rglob("link.ndjson")), "the run's artifacts are kept"
