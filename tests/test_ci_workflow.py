"""The GitHub Actions workflow (.github/workflows/longlook.yml): actionlint finds
nothing in it, and it does what README.md says: a job per stack × shard running its
part of the properties with results kept, and a job that merges every shard into
one report."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from conftest import skip_or_fail
from harness.testbed.link import REPO_ROOT

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "longlook.yml"
ACTIONLINT = REPO_ROOT / ".tools" / "bin" / "actionlint"


def test_actionlint_finds_nothing():
    if not ACTIONLINT.exists():
        skip_or_fail("actionlint is not built (make setup builds it into .tools/bin)")
    r = subprocess.run([str(ACTIONLINT), "-no-color", str(WORKFLOW)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path):
    """The check can fail: an undefined matrix key and an unknown action input."""
    if not ACTIONLINT.exists():
        skip_or_fail("actionlint is not built (make setup builds it into .tools/bin)")
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("matrix.shard }}/2", "matrix.shards }}/2"))
    r = subprocess.run([str(ACTIONLINT), "-no-color", str(broken)], capture_output=True, text=True, check=False)
    assert r.returncode == 1 and "shards" in r.stdout, r.stdout


def test_the_matrix_shards_every_stack_and_a_job_merges_the_report():
    wf = yaml.safe_load(WORKFLOW.read_text())
    jobs = wf["jobs"]
    matrix = jobs["properties"]["strategy"]["matrix"]
    assert set(matrix["stack"]) >= {"aioquic", "quic-go", "quinn", "quiche"}
    shards = matrix["shard"]
    run = " ".join(step.get("run", "") for step in jobs["properties"]["steps"])
    assert f"--shard \"${{{{ matrix.shard }}}}/{len(shards)}\"" in run and "--results" in run
    assert jobs["report"]["needs"] == "properties"
    merge = " ".join(step.get("run", "") for step in jobs["report"]["steps"])
    assert "harness.cli report merged" in merge
