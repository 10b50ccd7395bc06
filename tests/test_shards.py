"""--shard I/N (harness/results/shards.py): the parts cover every case once, the split
is the same on every machine, durations balance it, and two shards run apart and
merged give the report one unsharded run gives (issue 18)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.results import shards
from harness.results.store import read
from harness.testbed.link import REPO_ROOT

IDS = [f"properties/test_{c}.py::test_{c}[aioquic-newreno]" for c in "abcdefghij"]


@pytest.mark.parametrize("parts", [1, 2, 3, 7, 12])
def test_every_case_is_in_exactly_one_part(parts):
    split = shards.split(IDS, parts)
    assert sorted(n for part in split for n in part) == sorted(IDS)
    assert len(split) == parts
    assert max(map(len, split)) - min(map(len, split)) <= 1, "without durations: equal counts"


def test_the_split_depends_on_the_cases_not_their_order():
    assert shards.split(IDS, 3) == shards.split(list(reversed(IDS)), 3)


def test_durations_balance_the_parts():
    known = {IDS[0]: 100.0, IDS[1]: 60.0, IDS[2]: 40.0} | {n: 1.0 for n in IDS[3:]}
    a, b = shards.split(IDS, 2, known)
    load = [sum(known[n] for n in part) for part in (a, b)]
    assert abs(load[0] - load[1]) <= 10, load
    assert IDS[0] in a and IDS[1] in b and IDS[2] in b, "longest first, each to the lighter part"


@pytest.mark.parametrize("bad", ["0/2", "3/2", "2", "a/b", "1/0"])
def test_a_bad_shard_names_the_fix(bad):
    with pytest.raises(shards.ShardError, match="give I/N with 1 ≤ I ≤ N"):
        shards.parse(bad)


def _run(tmp_path, name, *extra):
    results = tmp_path / f"{name}.ndjson"
    # Window properties and one with a recorded finding (F4: its outcome and finding
    # must survive the merge); quick ones, since the test runs them three times.
    argv = [sys.executable, "-m", "pytest", "properties/test_window.py",
            "properties/test_app_limited.py::test_no_window_growth_while_application_limited",
            "--impl", "aioquic", "--mode", "virtual", "--no-real-recheck", "--hypothesis-profile", "ci", "-q",
            "-p", "no:cacheprovider", "--artifacts", str(tmp_path / name), "--results", str(results), *extra]
    r = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr[-2000:]
    return results, r.stdout


def test_two_shards_merged_judge_as_one_unsharded_run(tmp_path):
    whole, _ = _run(tmp_path, "whole")
    one, out1 = _run(tmp_path, "one", "--shard", "1/2", "--shard-durations", str(whole))
    two, out2 = _run(tmp_path, "two", "--shard", "2/2", "--shard-durations", str(whole))
    assert "deselected" in out1 and "deselected" in out2

    def outcomes(*paths):
        return {r["nodeid"]: (r["outcome"], r["finding"]) for r in read(list(paths)).records}

    a, b = outcomes(one), outcomes(two)
    assert a and b and not set(a) & set(b), "each case in one shard"
    assert outcomes(one, two) == outcomes(whole)
    merged = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(one), str(two), "--out",
                             str(tmp_path / "site"), "--no-plots"], cwd=REPO_ROOT, capture_output=True, text=True,
                            check=False)
    assert merged.returncode == 0, merged.stderr
    assert f"{len(outcomes(whole))} records from 2 file(s)" in merged.stdout


def test_durations_from_a_missing_file_are_a_usage_error(tmp_path):
    argv = [sys.executable, "-m", "pytest", "properties/test_window.py", "--impl", "aioquic", "--collect-only",
            "-q", "--shard", "1/2", "--shard-durations", str(tmp_path / "none.ndjson")]
    r = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert r.returncode == 4 and "--shard-durations" in r.stderr and "none.ndjson" in r.stderr, r.stderr[-1500:]
