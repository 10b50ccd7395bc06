"""Two testbeds at once: the properties under pytest-xdist (`make check JOBS=2`),
and a stale-run sweep that leaves a concurrent run's testbed alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import skip_or_fail
from harness import endpoints
from harness.testbed import netns
from harness.testbed.link import REPO_ROOT, Link
from harness.verdict.runner import _slug
from harness.schedule import LinkSettings, Schedule

pytestmark = pytest.mark.netns

#: Two cases (aioquic's NewReno and CUBIC) of a quick property: one per worker.
PROPERTY = "properties/test_reordering.py::test_reordering_below_threshold_causes_no_recovery"


def test_sweep_spares_a_live_runs_new_emulator(netns_ready, tmp_path, monkeypatch):
    """A sweep that listed the namespaces just before another live process made its
    pair must not take that pair's emulator for an orphan."""
    schedule = Schedule.constant(seed=1, settings=LinkSettings(delay_us=1000))
    with netns.namespace_pair() as (client, server), Link(schedule, client, server, tmp_path) as link:
        # The listing as it was a moment before this pair existed.
        monkeypatch.setattr(netns, "list_ours", lambda: [])
        netns.sweep_stale()
        assert netns.pid_alive(link.pid), "the sweep killed a live owner's emulator"


def test_properties_run_under_xdist(netns_ready, tmp_path):
    """`-n 2`: each worker runs its own testbeds and writes its own example
    directories; the verdicts come back, and no namespace is left."""
    try:
        import xdist  # noqa: F401
    except ImportError:
        skip_or_fail("pytest-xdist is not installed; run `make setup`")
    if not endpoints.load("aioquic").is_built():
        skip_or_fail("aioquic endpoint is not built; run `make setup`")
    artifacts = tmp_path / "artifacts"
    argv = [sys.executable, "-m", "pytest", PROPERTY, "-n", "2", "--impl", "aioquic", "--hypothesis-profile", "ci",
            "--artifacts", str(artifacts), "--keep-passing", "-p", "no:cacheprovider", "-rs"]
    r = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
    out = r.stdout[-3000:] + r.stderr[-2000:]
    assert r.returncode == 0, out
    assert "created: 2/2 workers" in r.stdout, out
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|skipped|failed|error)", r.stdout)}
    # Both judged: this property has no CPU rule, so anything else (a skip, an
    # inconclusive case) means a worker lost an example's qlog, the bug to catch.
    assert counts.get("passed", 0) == 2, out
    examples = sorted(artifacts.glob("*/example-*/example.json"))
    assert examples, f"no example directories under {artifacts}"
    nodeids = set()
    for path in examples:
        saved = json.loads(path.read_text())
        # Each directory holds the example of the test it is filed under.
        assert _slug(saved["nodeid"]) == path.parent.parent.name, path
        nodeids.add(saved["nodeid"])
    if counts.get("passed", 0) == 2:
        assert len(nodeids) == 2, nodeids
    orphans = [n for n in netns.list_ours() if not netns.pid_alive(netns.owner_pid(n) or 0)]
    assert not orphans, f"the workers left namespaces: {orphans}"
