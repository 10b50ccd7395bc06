"""The fair-share property separates what it must (issue 5: "a CUBIC controller
emulating two flows must fail it"), on its own ci verdict:

- the control: kernel TCP CUBIC in the QUIC flow's place, started as late and counted
  the same way, passes. A late starter or the count from its first second on would
  otherwise bias the share, and every finding against the ×1.5 bound with it;
- aioquic CUBIC emulating two flows (tests/mutants/cubic_two_flows.py) fails.

Each runs the real property in a pytest process of its own, on Kakhki's bottleneck
against one TCP CUBIC flow (about 15 s per repetition, at most 3). Both are `solo`:
aioquic's Python sender is CPU-bound at these rates, and beside another test on a
2-core host the property rightly calls the run endpoint-bound ("inconclusive", the
CI run of 2026-12-02) instead of judging it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import skip_or_fail
from harness import endpoints

REPO_ROOT = Path(__file__).resolve().parent.parent
PROPERTY = "properties/test_fairness.py::test_fair_share_against_tcp_cubic"


def run_property(impl: str, cc: str, tmp_path: Path) -> subprocess.CompletedProcess:
    if not endpoints.load(impl).is_built():
        skip_or_fail(f"{impl} endpoint is not built; run `make setup`")
    argv = [sys.executable, "-m", "pytest", "properties/test_fairness.py", "-k", "against_tcp",
            "--impl", impl, "--cc", cc, "--hypothesis-profile", "ci", "--artifacts", str(tmp_path),
            "-p", "no:cacheprovider", "-q", "-rfsxX"]
    return subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.solo
def test_kernel_tcp_in_the_quic_flows_place_passes(netns_ready, tmp_path):
    r = run_property("tcp", "cubic", tmp_path)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.solo
def test_cubic_emulating_two_flows_fails(netns_ready, tmp_path):
    r = run_property("aioquic", "tests.mutants.cubic_two_flows:CubicTwoFlows", tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "1 failed" in r.stdout, out[-3000:]
    assert f"{PROPERTY}[aioquic-tests.mutants.cubic_two_flows_CubicTwoFlows-1]" in out, out[-3000:]
    # Three runs, every one above the bound: the ci verdict's failing case.
    assert "against 1 TCP CUBIC flow(s) the QUIC flow took ×[" in out and "in 3 run(s)" in out, out[-3000:]
    assert "longlook replay" in out, "a failure comes with its replay line"
