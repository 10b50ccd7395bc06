"""`longlook versions`: what changed between releases (harness.versions.compare), the
command's input errors, and one real sweep over two aioquic releases."""

from __future__ import annotations

import json

import pytest

from harness import cli
from harness.versions import SCHEDULES, compare, sweep


#: Releases these tests install go to a cache of their own (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("own_release_cache")


def _release(version, mbps=None, transitions=None, outcomes=None):
    mbps = mbps or {}
    goodput = {s: compare.Goodput(s, tuple(mbps.get(s, (10.0, 10.0, 10.0, 10.0)))) for s in SCHEDULES.values()}
    return compare.Release(version, goodput, transitions or {"Init→SlowStart": 4}, outcomes or {}, 0)


def test_an_outcome_that_changed_is_listed_with_what_it_was():
    old = _release("1.0.0", outcomes={"test_a[aioquic-newreno]": "passed", "test_b[aioquic-newreno]": "failed"})
    new = _release("1.1.0", outcomes={"test_a[aioquic-newreno]": "failed", "test_b[aioquic-newreno]": "failed",
                                      "test_c[aioquic-newreno]": "passed"})
    d = compare.diff(old, new)
    assert d.outcomes == [("test_a[aioquic-newreno]", "passed", "failed"), ("test_c[aioquic-newreno]", "absent", "passed")]
    text = compare.render_diff(d)
    assert "test_a[aioquic-newreno]: passed → failed" in text and "test_b" not in text


def test_transitions_that_appear_and_disappear():
    old = _release("1.0.0", transitions={"Init→SlowStart": 4, "SlowStart→Recovery": 2})
    new = _release("1.1.0", transitions={"Init→SlowStart": 4, "Recovery→CongestionAvoidance": 1})
    d = compare.diff(old, new)
    assert d.appeared == ["Recovery→CongestionAvoidance"] and d.disappeared == ["SlowStart→Recovery"]


def test_a_goodput_change_counts_only_when_the_runs_separate():
    fast = {"lossy": (4.0, 4.1, 4.3, 4.4)}
    slow = {"lossy": (2.9, 3.0, 3.2, 3.3)}
    d = compare.diff(_release("1.0.0", mbps=slow), _release("1.1.0", mbps=fast))
    assert [row[0] for row in d.goodput] == ["lossy"]
    name, was, now, p = d.goodput[0]
    assert p < compare.ALPHA and now > was
    assert "goodput, lossy: 3.10 → 4.20 Mbit/s (+35%" in compare.render_diff(d)
    # Overlapping runs: a different median, but no change claimed.
    mixed = {"lossy": (3.0, 4.1, 2.9, 4.4)}
    d = compare.diff(_release("1.0.0", mbps=slow), _release("1.1.0", mbps=mixed))
    assert d.goodput == [] and any(r[0] == "lossy" and r[3] >= compare.ALPHA for r in d.unchanged_goodput)
    # Three runs against three cannot reach p < 0.05 however far apart: not claimed.
    d = compare.diff(_release("1.0.0", mbps={"lossy": (1.0, 1.1, 1.2)}), _release("1.1.0", mbps={"lossy": (9.0, 9.1, 9.2)}))
    assert d.goodput == []


def test_the_table_has_one_row_per_release_with_failed_runs_shown():
    r = compare.release("1.2.0", [
        {"x": 0, "ok": True, "goodput_bps": 16e6, "transitions": {"Init→SlowStart": 1}},
        {"x": 0, "ok": True, "goodput_bps": 18e6, "transitions": {"Init→SlowStart": 1, "SlowStart→Recovery": 1}},
        {"x": 1, "ok": False, "goodput_bps": 0},
    ], {"test_a[aioquic-newreno]": "passed"}, 1)
    assert r.goodput["clean"].mbps == (16.0, 18.0) and r.goodput["lossy"].failed == 1
    assert r.transitions == {"Init→SlowStart": 2, "SlowStart→Recovery": 1}
    text = compare.table([r])
    assert "| 1.2.0 | 1 passed | 17.00 [16.00–18.00] | — (1 failed) |" in text


@pytest.mark.parametrize("argv, message", [
    (["versions", "tquic", "--from", "1.5.0", "--to", "1.6.0", "--mode", "real", "--out", "X"],
     "tquic has no releases to choose from"),
    (["versions", "quinn", "--from", "0.11.9", "--to", "0.11.11", "--out", "X"],
     "--mode virtual: quinn@0.11.9 is real time only"),
    (["versions", "aioquic", "--from", "1.7.2", "--to", "1.0.0", "--out", "X"], "swap them"),
    (["versions", "aioquic", "--from", "1.0.0", "--to", "9.9.9", "--out", "X"], "PyPI has no release 9.9.9"),
    (["versions", "tcp", "--from", "1", "--to", "2", "--out", "X"], "--mode virtual: tcp is real time only"),
    (["versions", "aioquic", "--from", "1.0.0", "--to", "1.7.2", "--runs", "0", "--out", "X"], "--runs 0: give at least 1"),
])
def test_bad_input_is_one_line_naming_the_fix(argv, message, capsys, tmp_path):
    argv = [a if a != "X" else str(tmp_path / "out") for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_two_releases_are_swept_compared_and_the_second_call_reuses_everything(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["versions", "aioquic", "--from", "1.6.1", "--to", "1.7.0", "--quick", "--runs", "1",
            "--select", "test_initial_window_is_ten_datagrams", "--out", str(out)]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "| 1.6.1 | 1 passed |" in text and "| 1.7.0 | 1 passed |" in text and "### 1.6.1 → 1.7.0" in text
    runs = (out / "reference" / "runs.ndjson").read_text().splitlines()
    assert len(runs) == 2 * len(SCHEDULES)
    first = [json.loads(r) for r in runs]
    assert all(r["ok"] and r["mode"] == "virtual" and r["transitions"].get("Init→SlowStart") for r in first)
    assert {r["stack"] for r in first} == {"aioquic@1.6.1", "aioquic@1.7.0"}
    saved = json.loads((out / "versions.json").read_text())
    assert [r["version"] for r in saved] == ["1.6.1", "1.7.0"]
    # The records are the property run's own, with the release they ran.
    recs = [json.loads(ln) for ln in (out / "1.6.1" / "results.ndjson").read_text().splitlines()]
    assert {(r["stack"], r["version"], r["outcome"]) for r in recs} == {("aioquic", "1.6.1", "passed")}
    stamp = (out / "1.6.1" / "properties.json").stat().st_mtime_ns
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.strip() == text.strip()
    assert (out / "reference" / "runs.ndjson").read_text().splitlines() == runs
    assert (out / "1.6.1" / "properties.json").stat().st_mtime_ns == stamp


def test_a_different_selection_does_not_reuse_the_properties(tmp_path):
    opts = sweep.Options("aioquic", "newreno", tmp_path, quick=True, select="a")
    other = sweep.Options("aioquic", "newreno", tmp_path, quick=True, select="b")
    assert sweep.properties_command(opts, "1.6.1") != sweep.properties_command(other, "1.6.1")
    assert "--no-real-recheck" in sweep.properties_command(opts, "1.6.1")
    assert "--no-real-recheck" not in sweep.properties_command(sweep.Options("aioquic", "newreno", tmp_path), "1.6.1")


def test_minors_keeps_the_newest_patch_of_each_minor_version():
    from harness.endpoints.releases import newest_of_each_minor

    served = ["0.24.9", "0.25.0", "0.26.0", "0.26.1", "0.28.0", "0.29.0", "0.29.3", "0.29.10", "0.30.0", "1.0.0rc1"]
    assert newest_of_each_minor(served) == ["0.24.9", "0.25.0", "0.26.1", "0.28.0", "0.29.10", "0.30.0", "1.0.0rc1"]
    assert newest_of_each_minor([]) == []
