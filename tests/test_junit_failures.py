"""scripts/junit-failures.py, the digest `.ci/run` prints last: it must name every
failing or erroring case of every file with its verdict line, skip passing, skipped
and xfailed cases, and name a file it cannot read instead of stopping."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "junit-failures.py"

XML = """<?xml version="1.0"?><testsuites><testsuite>
<testcase classname="properties.test_pto" name="test_backoff[aioquic-newreno]">
<failure message="Deviation: pto-backoff: gap 2 is 30 ms">def test(): ...
&gt;   check(...)
E   Deviation: pto-backoff: gap 2 is 30 ms
E   measured: ratio=0.25
properties/test_pto.py:70: Deviation</failure></testcase>
<testcase classname="properties.test_window" name="test_ok[aioquic-newreno]"/>
<testcase classname="properties.test_window" name="test_skip[aioquic-cubic]"><skipped message="not applicable"/></testcase>
<testcase classname="properties.test_pto" name="test_xf[aioquic-cubic]"><skipped type="pytest.xfail" message="F28"/></testcase>
<testcase classname="tests.test_a" name="test_setup"><error message="fixture 'x' not found">no traceback lines</error></testcase>
</testsuite></testsuites>"""


def _run(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, files)], capture_output=True, text=True,
                          check=False)


def test_names_each_failure_and_error_with_its_verdict(tmp_path):
    path = tmp_path / "ci-local.xml"
    path.write_text(XML)
    done = _run(path)
    assert done.returncode == 0
    out = done.stdout
    assert "--- ci-local.xml: failure: properties.test_pto::test_backoff[aioquic-newreno]" in out
    assert "measured: ratio=0.25" in out
    assert out.count("Deviation: pto-backoff: gap 2 is 30 ms") == 1  # the message is not repeated
    assert "--- ci-local.xml: error: tests.test_a::test_setup" in out
    assert "no traceback lines" in out
    for quiet in ("test_ok", "test_skip", "test_xf"):
        assert quiet not in out
    assert "2 failing case(s) in 1 file(s)" in out


def test_an_unreadable_file_is_named_and_the_rest_still_read(tmp_path):
    good, bad = tmp_path / "a.xml", tmp_path / "b.xml"
    good.write_text(XML)
    bad.write_text("<testsuites>")
    done = _run(tmp_path / "missing.xml", bad, good)
    assert done.returncode == 0
    assert "missing.xml: not read (FileNotFoundError" in done.stdout
    assert "b.xml: not read (ParseError" in done.stdout
    assert "2 failing case(s) in 3 file(s)" in done.stdout
