"""Results as data (harness/results) and the static report (harness/report/site.py):
records built from fabricated reports and ledgers, shards merged, bad inputs named,
and the HTML parsed back: the matrix's cells, their judged counts (a pass on none
must not look like a pass), the cell pages' evidence, links that resolve, and no
network resource anywhere. One slow test runs a real property in virtual time."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from _pytest.reports import TestReport

from harness import cli
from harness.report.site import build_site, group_of, read_findings_doc
from harness.results import FORMAT, OUTCOMES
from harness.results.record import build, finding_id, plain
from harness.results.store import ResultsError, Writer, coverage, read
from harness.testbed.link import REPO_ROOT
from harness.verdict.deviation import deviation
from harness.verdict.outcomes import Ledger

ROOT = Path(__file__).resolve().parent.parent
PROP = "test_cwnd_never_below_minimum_window"
APP = "test_no_window_growth_while_application_limited"


class _Stack:
    def __init__(self, name, version):
        self.name, self.version = name, version


class _CC:
    def __init__(self, name, family, beta):
        self.name, self.family, self.beta = name, family, beta


class _Target:
    def __init__(self, stack="aioquic", version="1.7.2", cc="newreno", family="newreno", beta=0.5, peer=None,
                 direction="download"):
        self.stack, self.cc = _Stack(stack, version), _CC(cc, family, beta)
        self.peer, self.direction = (_Stack(peer, "1") if peer else None), direction


def _report(prop=PROP, case="aioquic-newreno", outcome="passed", longrepr=None, when="call", **extra):
    r = TestReport(f"properties/test_x.py::{prop}[{case}]", ("properties/test_x.py", 10, prop), {}, outcome,
                   longrepr, when, duration=1.25)
    for k, v in extra.items():
        setattr(r, k, v)
    return r


def _record(prop=PROP, case="aioquic-newreno", outcome="passed", exc=None, ledger=None, kept=(), target=None,
            **report_kw):
    stack, cc = case.split("-", 1)
    target = target or _Target(stack=stack, cc=cc, family=cc if cc in ("newreno", "cubic") else "bbr")
    return build(_report(prop, case, outcome, **report_kw), exc, prop=prop, case=case, target=target,
                 mode="virtual", backend="local", ledger=ledger or Ledger(judged=3), kept=list(kept))


# ------------------------------------------------------------------ records


def test_a_passing_case_records_its_requirements_and_examples():
    rec = _record(ledger=Ledger(judged=5, inconclusive=["starved"], not_exercised=[]))
    assert rec["format"] == FORMAT and rec["outcome"] == "passed" and rec["reason"] is None
    assert "9002-7.2-minimum-window" in rec["requirements"] and ["9002", "7.2"] in rec["sections"]
    assert (rec["stack"], rec["version"], rec["cc"], rec["case"]) == ("aioquic", "1.7.2", "newreno", "aioquic-newreno")
    assert (rec["mode"], rec["backend"], rec["duration_s"]) == ("virtual", "local", 1.25)
    assert rec["examples"] == {"judged": 5, "failed": 0, "inconclusive": 1, "not_exercised": 0}
    assert rec["deviations"] == [] and rec["artifacts"] == [] and rec["replay"] is None
    assert json.loads(json.dumps(rec, allow_nan=False)) == rec


def test_an_expected_failure_names_its_finding_and_flattens_its_deviations(tmp_path):
    one = deviation("growth-while-app-limited", "cwnd grew 12520 → 12696", growth_bytes=176, inflight_share=0.067)
    same = deviation("growth-while-app-limited", "cwnd grew 12520 → 12696", growth_bytes=176, inflight_share=0.067)
    other = deviation("beta", "cut to 0.70·cwnd", factor=0.7, ratio=float("inf"))
    group = ExceptionGroup("explicit, then generated", [one, ExceptionGroup("inner", [same, other])])
    rec = _record(APP, outcome="skipped", exc=group, kept=[tmp_path / "a", tmp_path / "b"],
                  wasxfail="F4: aioquic grows its window while application-limited")
    assert rec["outcome"] == "expected failure" and rec["finding"] == "F4"
    assert [d["kind"] for d in rec["deviations"]] == ["growth-while-app-limited", "beta"]
    assert rec["deviations"][0]["measured"] == {"growth_bytes": 176, "inflight_share": 0.067}
    assert rec["deviations"][1]["measured"]["ratio"] == "inf"  # plain JSON: no Infinity
    assert "[deviation:" not in rec["deviations"][0]["message"]
    assert rec["examples"]["judged"] == 4 and rec["examples"]["failed"] == 1
    assert rec["replay"] == f"longlook replay {tmp_path / 'b'}"
    assert rec["artifacts"] == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert rec["schedule"] is None, "the replayed example kept no schedule.json"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "schedule.json").write_text(json.dumps({"seed": 7, "phases": [{"start_us": 0}]}))
    again = _record(APP, outcome="skipped", exc=group, kept=[tmp_path / "a", tmp_path / "b"],
                    wasxfail="F4: aioquic grows its window while application-limited")
    assert again["schedule"] == {"seed": 7, "phases": [{"start_us": 0}]}, "the record carries the schedule"
    assert rec["verdict"].startswith("F4: aioquic") and "ExceptionGroup" in rec["verdict"]
    json.dumps(rec, allow_nan=False)


def test_a_failure_whose_replay_was_rejected_records_what_failed():
    # Hypothesis's FlakyFailure after a real-time failure may hold only the replay's
    # rejection; the record names the deviation the runner saw, not "NotExercised".
    from hypothesis.errors import FlakyFailure

    from harness.verdict.outcomes import NotExercised

    flaky = FlakyFailure("Inconsistent results from replaying a test case!", [NotExercised("no report")])
    ledger = Ledger(judged=2)
    ledger.record_failure(deviation("probes-not-in-flight", "4659 B below", unexplained=349))
    rec = _record(outcome="failed", exc=flaky, ledger=ledger)
    assert [d["kind"] for d in rec["deviations"]] == ["probes-not-in-flight"]
    assert rec["deviations"][0]["measured"] == {"unexplained": 349}


@pytest.mark.parametrize("kind", ["inconclusive", "not exercised"])
def test_an_undecided_case_keeps_its_kind_and_reason(kind):
    rec = _record(outcome="skipped", longrepr=("properties/test_x.py", 11, f"{kind}: the server starved"),
                  longlook_outcome=kind, ledger=Ledger(judged=0, inconclusive=["the server starved"]))
    assert rec["outcome"] == kind and rec["reason"] == "the server starved" and rec["examples"]["judged"] == 0


def test_skips_failures_and_errors():
    skip = _record(outcome="skipped", longrepr=("p", 1, "Skipped: capability: quiche logs no packet lost"))
    assert (skip["outcome"], skip["reason"]) == ("skipped", "capability: quiche logs no packet lost")
    crash = _record(outcome="failed", exc=TypeError("bad operand"), longrepr="TypeError: bad operand")
    assert crash["outcome"] == "failed" and crash["deviations"] == [
        {"kind": None, "exception": "TypeError", "message": "bad operand"}]
    assert crash["examples"]["failed"] == 0
    error = _record(outcome="failed", when="setup", longrepr="fixture 'longlook' failed: no root")
    assert error["outcome"] == "error" and "no root" in error["reason"]
    xpass = _record(outcome="passed", wasxfail="F15: quinn sometimes falls behind")
    assert (xpass["outcome"], xpass["finding"]) == ("unexpected pass", "F15")
    fixed = _record(outcome="failed", longrepr="[XPASS(strict)] F2: quic-go never collapses its window")
    assert (fixed["outcome"], fixed["finding"]) == ("failed", "F2")  # fixed upstream: the entry must go
    assert {r["outcome"] for r in (skip, crash, error, xpass, fixed)} <= set(OUTCOMES)


def test_finding_ids_and_plain_values():
    assert finding_id("F12: picoquic (Prague) ...") == "F12" and finding_id("no finding here") is None
    assert plain({"a": (1, 2.5), "b": float("nan"), 3: {1}}) == {"a": [1, 2.5], "b": "nan", "3": [1]}


# ------------------------------------------------------------------ files


def _append_many(path: str, worker: int) -> None:
    w = Writer.__new__(Writer)  # the file exists: append only, as a second writer would
    w.path = Path(path)
    for i in range(50):
        w.append({"worker": worker, "i": i, "pad": "x" * 3000})


def test_writers_append_whole_lines_side_by_side(tmp_path):
    path = tmp_path / "r.ndjson"
    Writer(path)
    procs = [multiprocessing.Process(target=_append_many, args=(str(path), n)) for n in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(20)
    lines = path.read_text().splitlines()
    assert len(lines) == 150 and all(json.loads(line)["pad"] for line in lines)


def _write(path: Path, records: list[dict]) -> Path:
    w = Writer(path)
    for r in records:
        w.append(r)
    return path


def test_shards_merge_and_a_rerun_replaces_its_case(tmp_path):
    a = _write(tmp_path / "shard-1.ndjson", [_record(case="aioquic-newreno"), _record(APP, "aioquic-newreno")])
    b = _write(tmp_path / "shard-2.ndjson", [_record(case="aioquic-cubic"),
                                            _record(case="aioquic-newreno", outcome="failed", exc=TypeError("x"))])
    res = read([a, b])
    assert len(res.records) == 3 and res.replaced == 1 and res.sources == [(str(a), 2), (str(b), 2)]
    assert [r["outcome"] for r in res.records if r["case"] == "aioquic-newreno" and r["property"] == PROP] == ["failed"]
    assert len(read([tmp_path]).records) == 3  # a directory of shards


def test_bad_inputs_are_one_message_naming_the_file(tmp_path, capsys):
    with pytest.raises(ResultsError, match="no such results file"):
        read([tmp_path / "missing.ndjson"])
    good = json.dumps(_record())
    (tmp_path / "cut.ndjson").write_text(good + "\n" + good[:40])
    with pytest.raises(ResultsError, match=r"cut.ndjson:2: not a JSON record \(truncated"):
        read([tmp_path / "cut.ndjson"])
    (tmp_path / "old.ndjson").write_text(json.dumps(_record() | {"format": 0}) + "\n")
    with pytest.raises(ResultsError, match="old.ndjson:1: results format 0, this longlook reads format 1"):
        read([tmp_path / "old.ndjson"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsError, match="no \\*.ndjson"):
        read([tmp_path / "empty"])
    assert cli.main(["report", str(tmp_path / "cut.ndjson"), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cut.ndjson:2" in err and "Traceback" not in err


# ------------------------------------------------------------------ the site


class _Page(HTMLParser):
    """Cells of the matrix (class, text), and every href/src."""

    def __init__(self):
        super().__init__()
        self.cells: list[tuple[str, str]] = []
        self.refs: list[str] = []
        self._td: list | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.refs += [a[k] for k in ("href", "src") if a.get(k)]
        if tag == "td":
            self._td = [a.get("class", ""), ""]

    def handle_data(self, data):
        if self._td is not None:
            self._td[1] += data + " "

    def handle_endtag(self, tag):
        if tag == "td" and self._td is not None:
            self.cells.append((self._td[0], " ".join(self._td[1].split())))
            self._td = None


def _parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text())
    return p


def _example(tmp_path: Path) -> Path:
    d = tmp_path / "artifacts" / "example-0007"
    (d / "server" / "qlog").mkdir(parents=True)
    (d / "pcap").mkdir()
    (d / "server" / "qlog" / "abc.qlog").write_text("{}")
    (d / "pcap" / "server.pcap").write_bytes(b"")
    (d / "server" / "keys.log").write_text("")
    (d / "schedule.json").write_text(json.dumps({"seed": 3, "phases": [{"start_us": 0}]}))
    return d


def _site_records(tmp_path: Path) -> list[dict]:
    kept = _example(tmp_path)
    f4 = deviation("growth-while-app-limited", "cwnd grew", growth_bytes=176, inflight_share=0.067)
    return [
        _record(case="aioquic-newreno", ledger=Ledger(judged=5)),
        _record(case="aioquic-cubic", ledger=Ledger(judged=0)),  # a pass on nothing judged
        _record(APP, "aioquic-newreno", outcome="skipped", exc=f4, kept=[kept], ledger=Ledger(judged=0),
                wasxfail="F4: aioquic grows its window while application-limited"),
        _record(APP, "aioquic-cubic", outcome="skipped", longrepr=("p", 1, "inconclusive: the server starved"),
                longlook_outcome="inconclusive", ledger=Ledger(judged=0, inconclusive=["the server starved"])),
        _record("test_recovery_reduces_window_by_beta", "quinn-cubic", outcome="failed",
                exc=deviation("beta", "cut to 0.5", factor=0.5), ledger=Ledger(judged=2)),
    ]


def test_the_matrix_shows_outcomes_and_judged_counts(tmp_path, monkeypatch):
    from harness.report import outputs

    def fake_plot(run_dir, stack, out_dir, beta, name):
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{name}-cwnd.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        return {"plot": out_dir / f"{name}-cwnd.png"}

    monkeypatch.setattr(outputs, "plot_example", fake_plot)
    records = _site_records(tmp_path)
    out = tmp_path / "site"
    made = build_site(records, out, sources=[("r.ndjson", len(records))], coverage=coverage(records))
    assert (made["records"], made["cells"], made["plots"]) == (5, 5, 1)
    index = _parse(out / "index.html")
    text = (out / "index.html").read_text()
    for row in ("aioquic-newreno", "aioquic-cubic", "quinn-cubic"):
        assert row in text
    assert text.index("RFC 9002 §7") > 0
    cells = [c for c in index.cells if "cell" in c[0]]
    # Each cell: its outcome, the examples judged, and the mode that judged it.
    assert sorted(t for _, t in cells) == sorted([
        "passed 5 judged virtual", "passed 0 judged virtual", "expected failure 1 judged F4 virtual",
        "inconclusive 0 judged virtual", "failed 3 judged virtual"]), cells
    zero = [c for c, t in cells if t == "passed 0 judged virtual"]
    assert zero and "zero" in zero[0].split()  # hatched: no verdict
    assert all("zero" not in c.split() for c, t in cells if t != "passed 0 judged virtual")
    assert sum(c == "none" for c, _ in index.cells) == 4  # properties not run on a row

    # Every page's links resolve, and no page loads anything from a network.
    pages = sorted(out.rglob("*.html"))
    assert len(pages) == 6 + 5  # index, pairs, findings, coverage, model, reproductions; a page per cell
    for page in pages:
        assert "http://" not in page.read_text() and "https://" not in page.read_text(), page
        for ref in _parse(page).refs:
            target = ref.split("#")[0]
            if not target:  # an anchor on the same page
                assert f'id="{ref[1:]}"' in page.read_text(), f"{page}: {ref}"
                continue
            assert (page.parent / target).exists(), f"{page}: {ref}"

    f4 = next(p for p in pages if p.name.startswith("no_window_growth") and "newreno" in p.name)
    body = f4.read_text()
    assert "growth-while-app-limited" in body and "growth_bytes=176" in body and "inflight_share=0.067" in body
    assert f"longlook replay {tmp_path / 'artifacts' / 'example-0007'}" in body
    refs = _parse(f4).refs
    assert "../findings.html#F4" in refs
    assert any(r.endswith("docs/findings.md#f4--aioquic-grows-its-window-while-application-limited") for r in refs)
    assert any(r.endswith("server/qlog/abc.qlog") for r in refs) and any(r.endswith("pcap/server.pcap") for r in refs)
    assert any(r.endswith("-cwnd.png") for r in refs)
    zero_page = next(p for p in pages if p.name.startswith("cwnd_never") and "cubic" in p.name)
    assert "no example was judged" in zero_page.read_text()

    findings = (out / "findings.html").read_text()
    assert 'id="F4"' in findings and "F4 — aioquic grows its window while application-limited" in findings
    cov = (out / "coverage.html").read_text()
    assert "9002-7.2-minimum-window" in cov and "aioquic-newreno" in cov and "quinn-cubic" in cov


def test_the_pairs_page_is_a_client_by_server_grid_judging_the_sender(tmp_path):
    records = [
        _record(case="aioquic-newreno", ledger=Ledger(judged=4)),
        _record(case="aioquic-newreno-upload-to-tquic", outcome="failed", exc=deviation("beta", "cut to 0.5"),
                target=_Target("aioquic", peer="tquic", direction="upload")),
        _record(APP, "quinn-cubic-to-quiche", target=_Target("quinn", cc="cubic", family="cubic", peer="quiche")),
        _record(APP, "quinn-cubic", outcome="skipped", wasxfail="F9: something",
                target=_Target("quinn", cc="cubic", family="cubic", peer="quiche")),
    ]
    assert (records[1]["peer"], records[1]["direction"]) == ("tquic", "upload")
    old = dict(records[0])  # a record written before peer and direction were kept
    del old["peer"], old["direction"]
    records.append(old)
    build_site(records, tmp_path / "site")
    page = tmp_path / "site" / "pairs.html"
    grid = _parse(page)
    squares = [t for c, t in grid.cells if c.startswith("cell")]
    # clients aioquic and quiche; servers aioquic, quinn, tquic: three pairs met, three not.
    assert sum(c == "none" for c, _ in grid.cells) == 3
    assert "passed ↓ server sends: 2 passed · 8 judged" in squares  # aioquic with itself; the old record too
    assert "failed ↑ client sends: 1 failed · 4 judged" in squares  # the upload judges aioquic's client
    assert "expected failure ↓ server sends: 1 expected failure, 1 passed · 6 judged" in squares
    text = page.read_text()
    assert "quiche client · quinn server" in text and "aioquic client · tquic server" in text
    assert "tquic client" not in text  # tquic only served
    for ref in grid.refs:
        target = ref.split("#")[0]
        assert (page.parent / target).exists() if target else f'id="{ref[1:]}"' in text, ref
    assert 'href="pairs.html"' in (tmp_path / "site" / "index.html").read_text()


def test_coverage_reads_records_as_the_junit_table_does():
    rows, counts = coverage([_record(case="aioquic-newreno"), _record(APP, "aioquic-newreno", outcome="skipped",
                                                                      wasxfail="F4: grows")])
    header = rows[0]
    col = header.index("aioquic-newreno")
    by_id = {r[0]: r[col] for r in rows[1:]}
    assert by_id["9002-7.2-minimum-window"] == "judged"
    assert by_id["9002-7.8-no-growth-when-underutilized"].startswith("finding")
    assert counts[0][0] == "strength"


def test_columns_group_by_rfc_section():
    assert group_of([["9002", "7.3.2"], ["9438", "4.6"]])[1] == "RFC 9002 §7"
    assert group_of([["9438", "4.2"]])[1] == "RFC 9438 §4"
    assert group_of([["9002", "B.2"]])[1] == "RFC 9002 App. B"
    assert group_of([])[1] == "not in the catalogue"
    assert group_of([["9002", "5.1"]])[0] < group_of([["9002", "6.2"]])[0] < group_of([["9438", "4.6"]])[0]
    assert "F1" in read_findings_doc(ROOT / "docs" / "findings.md")


# ------------------------------------------------------------------ end to end


@pytest.mark.slow
def test_a_virtual_run_becomes_a_report(tmp_path):
    """pytest properties/ --results (two xdist workers), then longlook report:
    aioquic's two controllers in rows, the minimum-window property passing, the F4
    finding with its plot."""
    results = tmp_path / "results.ndjson"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "properties/test_window.py", "properties/test_app_limited.py",
         "-k", "minimum or application_limited", "--impl", "aioquic", "--mode", "virtual", "--no-real-recheck",
         "--hypothesis-profile", "ci", "--artifacts", str(tmp_path / "artifacts"), "--results", str(results),
         "-n", "2", "-p", "no:cacheprovider", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert {(r["property"], r["case"], r["outcome"]) for r in records} == {
        (PROP, "aioquic-newreno", "passed"), (PROP, "aioquic-cubic", "passed"),
        (APP, "aioquic-newreno", "expected failure"), (APP, "aioquic-cubic", "expected failure")}
    assert all(r["examples"]["judged"] > 0 for r in records)
    assert {r["worker"] for r in records} <= {"gw0", "gw1"}  # built by the workers, written by the controller
    site = tmp_path / "site"
    rep = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(results), "--out", str(site)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr
    index = (site / "index.html").read_text()
    assert "aioquic-newreno" in index and "aioquic-cubic" in index
    assert "F4" in index
    pngs = list((site / "cells").rglob("*-cwnd.png"))
    assert len(pngs) == 2 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


# ------------------------------------------------------------------ baseline


def test_the_baseline_marks_regressions_improvements_and_other_changes(tmp_path):
    from harness.report.baseline import classify

    assert classify("passed", "passed") is None
    assert classify("passed", "failed").kind == "regression"
    assert classify("expected failure", "unexpected pass").kind == "regression"
    assert classify("failed", "passed").kind == "improvement"
    assert classify("passed", "inconclusive").kind == "changed"
    assert classify(None, "passed").kind == "new"
    old = [_record(case="aioquic-newreno"), _record(case="aioquic-cubic", outcome="failed",
                                                   exc=deviation("beta", "cut", factor=0.5)),
           _record(APP, "aioquic-newreno")]
    new = [_record(case="aioquic-newreno", outcome="failed", exc=deviation("beta", "cut", factor=0.9)),
           _record(case="aioquic-cubic"), _record(APP, "aioquic-newreno"), _record(APP, "aioquic-cubic")]
    for rec in new:  # a new release of the stack is compared with the one it replaces
        rec["version"] = "9.9.9"
    now, before = _write(tmp_path / "now.ndjson", new), _write(tmp_path / "old.ndjson", old)
    r = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(now), "--out", str(tmp_path / "site"),
                        "--no-plots", "--baseline", str(before)], cwd=REPO_ROOT, capture_output=True, text=True,
                       check=False)
    assert r.returncode == 1, "a regression fails the report's exit status"
    assert "1 regression, 1 improvement, 0 changed, 1 new" in r.stdout
    assert f"regression: {PROP} on aioquic-newreno: passed → failed" in r.stdout
    assert f"improvement: {PROP} on aioquic-cubic: failed → passed" in r.stdout
    index = (tmp_path / "site" / "index.html").read_text()
    assert "regression: was passed" in index and "improvement: was failed" in index
    changes = _parse(tmp_path / "site" / "changes.html")
    assert [t for _, t in changes.cells][:5] == ["regression", PROP, "aioquic 9.9.9 · newreno · virtual", "passed", "failed"]
    same = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(before), "--out",
                           str(tmp_path / "same"), "--no-plots", "--baseline", str(before)], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=False)
    assert same.returncode == 0 and "against the baseline: 0 regressions, 0 improvements, 0 changed, 0 new" \
        in same.stdout


def test_a_failing_cell_gets_its_capture_with_the_keys_embedded(tmp_path):
    """Made after the verdict, for the kept example only: Wireshark opens the pcapng
    and decrypts it with no key log beside it (a Decryption Secrets Block)."""
    wire = REPO_ROOT / "tests" / "fixtures" / "wire" / "quic-go"
    d = tmp_path / "artifacts" / "example-0001"
    (d / "pcap").mkdir(parents=True)
    (d / "server").mkdir()
    (d / "pcap" / "server.pcap").write_bytes((wire / "pcap" / "server.pcap").read_bytes())
    (d / "server" / "keys.log").write_text((wire / "keys.log").read_text())
    rec = _record(case="quic-go-newreno", outcome="failed", exc=deviation("beta", "cut", factor=0.9), kept=[d])
    build_site([rec], tmp_path / "site", plots=True)
    pcapng = d / "pcap" / "server-with-keys.pcapng"
    data = pcapng.read_bytes()
    assert data[:4] == b"\x0a\x0d\x0d\x0a", "a pcapng section header"
    assert b"\x0a\x00\x00\x00" in data[:4096] and b"CLIENT_HANDSHAKE_TRAFFIC_SECRET" in data, "the secrets block"
    page = next((tmp_path / "site" / "cells").glob("*.html")).read_text()
    assert "server-with-keys.pcapng" in page and "capture with keys (Wireshark)" in page


def test_the_model_pages_show_each_target_s_state_machine_as_its_runs_took_it(tmp_path):
    """--model-coverage: model.html per target, a page per stack · controller with its
    state machine drawn (the edges it took, with counts), linked from the matrix."""
    cov = tmp_path / "model-coverage"
    cov.mkdir()
    taken = [["SlowStart", "OnPacketsLost", "Recovery", 2], ["Recovery", "OnPacketsAcked", "CongestionAvoidance", 2]]
    (cov / "aioquic-newreno.ndjson").write_text(json.dumps({"target": "aioquic-newreno", "transitions": taken,
                                                           "ect": False, "takes_cap": True}) + "\n")
    made = build_site([_record(case="aioquic-newreno")], tmp_path / "site", plots=False, model_coverage=cov)
    assert not [n for n in made["notes"] if "dot" in n or "TLC" in n], made["notes"]
    model = (tmp_path / "site" / "model.html").read_text()
    assert "aioquic-newreno: 1 run," in model and "model transitions observable on it" in model
    # A sender the link could not CE-mark: its ECN transitions are not observable on it.
    assert "<td>SlowStart</td><td>OnEcnCe</td><td>Recovery</td><td>—</td>" in model
    from harness.model.coverage import model_transitions

    assert f"ECN for {sum(1 for t in model_transitions() if t[1] == 'OnEcnCe')})" in model
    from html import escape

    from harness.model.coverage import unobservable_lines

    # Each unobservable transition with its reason, and the states and actions only some
    # senders reach.
    assert unobservable_lines() and all(escape(line) in model for line in unobservable_lines())
    assert "OnEcnCe: observable where the sender marks" in model
    assert "CongestionAvoidanceMaxed: observable where the sender's endpoint takes a window cap" in model
    stack = tmp_path / "site" / "stacks" / "aioquic-newreno.html"
    text = stack.read_text()
    assert 'src="aioquic-newreno.svg"' in text and "Recovery" in text
    svg = (tmp_path / "site" / "stacks" / "aioquic-newreno.svg").read_text()
    assert "OnPacketsLost ×2" in svg, "the taken edge drawn with its count"
    assert 'href="stacks/aioquic-newreno.html"' in (tmp_path / "site" / "index.html").read_text()
    bare = build_site([_record(case="aioquic-newreno")], tmp_path / "bare", plots=False)
    assert "--model-coverage" in (tmp_path / "bare" / "model.html").read_text() and bare["cells"] == 1


def test_a_long_report_says_how_far_it_is(tmp_path, monkeypatch, capsys):
    """Without a terminal, a line every PROGRESS_EVERY_S; never a silent minute."""
    monkeypatch.setattr(cli, "PROGRESS_EVERY_S", 0.0)
    path = _write(tmp_path / "r.ndjson", [_record(case="aioquic-newreno"), _record(APP, "aioquic-newreno")])
    assert cli.main(["report", str(path), "--out", str(tmp_path / "site"), "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert "cells: 1 of 2" in err and "cells: 2 of 2" in err


def test_a_skip_in_an_explicit_example_keeps_the_propertys_reason_only():
    from types import SimpleNamespace

    from harness.results.record import outcome_of

    from harness.verdict.outcomes import settle

    note = ("not applicable: a rule of the bbr family; cubic is cubic\nFailing explicit example: "
            "test_x(\n    longlook=<harness.verdict.runner.Runner object at 0x7f>,\n)")
    report = SimpleNamespace(skipped=True, passed=False, failed=False, when="call",
                             longrepr=("f.py", 1, "Skipped: " + note), sections=[])
    settle(report, SimpleNamespace(excinfo=None), None, None)  # as the plugin does before the record
    assert outcome_of(report) == ("skipped", "not applicable: a rule of the bbr family; cubic is cubic")
    # The verdict text too: the skip's exception would repeat the note.
    from harness.results.record import verdict_text
    exc = pytest.skip.Exception("not applicable: a rule of the bbr family; cubic is cubic\nFailing explicit "
                                "example: test_x(...)")
    assert verdict_text(report, exc, "not applicable: a rule of the bbr family; cubic is cubic") \
        == "not applicable: a rule of the bbr family; cubic is cubic"
