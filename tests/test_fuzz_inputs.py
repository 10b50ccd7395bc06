"""tests/fuzz/inputs.py, the fuzzing of the files users hand the suite: every target
runs (its corpus, then mutations) without an error past its reader's own, and what
it found is kept here as regression cases."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from harness.results.store import ResultsError, read
from harness.testbed.link import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tests" / "fuzz"))
import inputs  # noqa: E402


@pytest.mark.parametrize("name", inputs.TARGETS)
def test_every_target_runs_its_corpus_and_mutations_cleanly(name):
    argv = [sys.executable, "tests/fuzz/inputs.py", name, "--runs", "300", "--no-save"]
    r = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    # libFuzzer counts a run of the seed corpus's load too at times ("Done 301 runs").
    done = re.search(r"Done (\d+) runs", r.stderr)
    assert done and int(done.group(1)) >= 300, r.stderr[-3000:]


def test_a_record_of_the_wrong_shape_is_one_error_naming_the_file_and_field(tmp_path):
    """Found by the results target: `sections` as a number reached the report and
    ended in a TypeError from its column grouping."""
    good = {"format": 1, "property": "test_p", "nodeid": "properties/test_p.py::test_p[aioquic-newreno]",
            "outcome": "passed", "examples": {"judged": 1}, "sections": [["9002", "7.2"]]}
    path = tmp_path / "r.ndjson"
    path.write_text(json.dumps(good) + "\n")
    assert read([path]).records[0]["sections"] == [["9002", "7.2"]]
    for field, bad, where in (("sections", 1.5, "$.sections"), ("examples", {"judged": "5"}, "$.examples.judged"),
                              ("deviations", [{"kind": 3}], "$.deviations[0].kind")):
        path.write_text(json.dumps(good | {field: bad}) + "\n")
        with pytest.raises(ResultsError, match=rf"{path}:1: not a results record.*{where.replace('$', '[$]').replace('[0]', '.0.')}"):
            read([path])


def test_the_crash_input_is_now_the_reader_s_error():
    """The results target's crash input, run through the target as the fuzzer does."""
    test = inputs.target("results")
    test(b'{"format": 1, "property": "p", "nodeid": "n", "outcome": "passed", "examples": {}, "sections": 2}\n')
    test(b"\xff\xfe not json")


def test_a_quinn_qlog_whose_metrics_data_is_a_string_is_read_not_crashed():
    """Found by the qlog-quinn target: a metrics_updated event whose data is a string
    reached quinn's RTT-unit guess (its own pass over the events) and raised
    AttributeError; the walk already skipped such events."""
    crash = (inputs.HERE / "corpus" / "qlog-quinn" / "crash-metrics-data-a-string").read_bytes()
    inputs.target("qlog-quinn")(crash)


def test_a_time_unit_that_is_no_string_is_no_crash():
    """Found by the qlog-picoquic target (2026-12-03, after 86,823 cases): a draft-00
    file whose configuration's time_units is a list reached the unit lookup as a dict
    key and raised TypeError; a unit that is no string now counts as none (ms)."""
    crash = (inputs.HERE / "corpus" / "qlog-picoquic" / "crash-time-units-a-list").read_bytes()
    inputs.target("qlog-picoquic")(crash)
