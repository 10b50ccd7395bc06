"""The mutant zoo's machinery (issue 7), and a subset of `make mutants` in CI.

Fast checks: every catalogue entry loads and claims its stock controller's
family; mutant modules patch nothing when imported, and patch and undo aioquic's
recovery module only when a controller is built; schedules' impairment counts and
the time to first failure read off Hypothesis' statistics.

One real run (netns, about two minutes): scripts/mutants.py with two aioquic
mutants and the two properties that should kill them, stock NewReno once. The
whole zoo is `make mutants` (BENCHMARKS.md has its figures and duration).
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys

import pytest

from conftest import skip_or_fail
from harness import endpoints
from harness.testbed.link import REPO_ROOT

# Mutants are imported as tests.mutants.<module>, the name --cc gives the endpoint,
# so that _patch here is the module the mutants patch through.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
from tests.mutants import _patch  # noqa: E402
from tests.mutants.catalogue import MUTANTS, impairment_events  # noqa: E402
from tests.mutants.zoo_plugin import _time_to_first_failure  # noqa: E402

AIOQUIC = [m for m in MUTANTS if m.stack == "aioquic"]


def test_zoo_has_at_least_twelve_aioquic_and_three_quinn_mutants():
    assert len(AIOQUIC) >= 12
    assert len([m for m in MUTANTS if m.stack == "quinn"]) >= 3
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)


def test_every_planted_controller_is_scored_or_says_why_not():
    """A mutant written for one property's test is scored by the zoo too, so that a
    property that stops killing it shows, whichever property it was written for."""
    from tests.mutants.catalogue import NOT_SCORED

    package = REPO_ROOT / "tests" / "mutants"
    planted = {p.stem for p in package.glob("*.py") if not p.stem.startswith("_")  # _reno: a base, not a mutant
               if re.search(r"^class \w+\((Reno|Cubic)CongestionControl\)", p.read_text(), re.M)}
    scored = {m.cc.split(":")[0].rsplit(".", 1)[-1] for m in AIOQUIC}
    assert planted - scored - set(NOT_SCORED) == set()
    assert set(NOT_SCORED) <= planted - scored


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_claims_the_family_of_its_stock_controller(mutant):
    stack = endpoints.load(mutant.stack)
    cc = stack.resolve_cc(mutant.cc)
    assert cc.family == stack.cc[mutant.stock].family, f"{mutant.cc} is judged as {cc.family}"
    assert mutant.cc not in stack.cc, "a mutant must never be offered as a conformant controller"


def test_importing_a_mutant_patches_nothing_and_building_one_patches_until_undone():
    from aioquic.quic import recovery

    threshold, update_rate = recovery.K_PACKET_THRESHOLD, recovery.QuicPacketPacer.update_rate
    try:
        for m in AIOQUIC:
            importlib.import_module(m.cc.split(":")[0])
        assert _patch.active() == []
        from tests.mutants.pacing_1ms import Pacing1ms
        from tests.mutants.packet_threshold_one import PacketThresholdOne

        PacketThresholdOne(max_datagram_size=1252)
        PacketThresholdOne(max_datagram_size=1252)  # a second connection must not lose the original
        Pacing1ms(max_datagram_size=1252)
        assert recovery.K_PACKET_THRESHOLD == 1
        pacer = recovery.QuicPacketPacer(max_datagram_size=1252)
        pacer.update_rate(congestion_window=1_000_000, smoothed_rtt=0.02)
        assert pacer.packet_time == pytest.approx(0.001), "one datagram per 1 ms tick"
    finally:
        _patch.undo_all()
    assert (recovery.K_PACKET_THRESHOLD, recovery.QuicPacketPacer.update_rate) == (threshold, update_rate)


def test_impairment_events_count_actions_link_impairments_and_changes():
    clean = {"rate_bps": 20_000_000, "delay_us": 20_000, "queue_bytes": 100_000}
    assert impairment_events({"phases": [{"start_us": 0, "c2s": clean, "s2c": clean}]}) == 0
    lossy = dict(clean, loss={"kind": "iid", "p": 0.01}, jitter_us=500)
    drops = [{"dir": "s2c", "index": i, "action": "drop"} for i in (30, 31)]
    assert impairment_events({"phases": [{"start_us": 0, "c2s": clean, "s2c": lossy}], "actions": drops}) == 4
    # A blackhole and the clean phase after it: one event. A rate drop: one more.
    dark = [{"start_us": 0, "c2s": clean, "s2c": clean},
            {"start_us": 5, "c2s": clean, "s2c": dict(clean, blackhole=True)},
            {"start_us": 9, "c2s": clean, "s2c": clean},
            {"start_us": 12, "c2s": clean, "s2c": dict(clean, rate_bps=2_000_000)}]
    assert impairment_events({"phases": dark}) == 2


def test_time_to_failure_leaves_out_shrinking():
    def case(status, runtime):
        return {"status": status, "runtime": runtime}

    stats = {
        "generate-phase": {"duration-seconds": 30.0,
                           "test-cases": [case("valid", 8.0), case("interesting", 9.0), case("valid", 13.0)]},
        "shrink-phase": {"duration-seconds": 100.0, "test-cases": [case("interesting", 7.0)] * 10},
    }
    # 150 s in all: 30 + 100 in phases, 9 s final replay, so 11 s of explicit examples.
    assert _time_to_first_failure(stats, 150.0) == pytest.approx(11.0 + 8.0 + 9.0)
    assert _time_to_first_failure({"generate-phase": {"duration-seconds": 5.0, "test-cases": []}}, 9.0) is None


PROPERTIES = [
    "properties/test_window.py::test_recovery_reduces_window_by_beta",
    "properties/test_persistent_congestion.py::test_persistent_congestion_collapses_window",
]


@pytest.mark.netns
@pytest.mark.slow
def test_make_mutants_kills_a_subset_and_stock_newreno_has_no_false_kill(netns_ready, tmp_path):
    if not endpoints.load("aioquic").is_built():
        skip_or_fail("aioquic endpoint is not built; run `make setup`")
    argv = [sys.executable, "scripts/mutants.py", "--only", "beta_0_9,persistent_congestion_ignored",
            "--stock-runs", "1", "--out", str(tmp_path), "--properties", *PROPERTIES]
    r = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = json.loads((tmp_path / "results.json").read_text())
    killers = {m["name"]: m["killed_by"]["nodeid"].split("[")[0] for m in result["mutants"]}
    assert killers == {"beta_0_9": PROPERTIES[0], "persistent_congestion_ignored": PROPERTIES[1]}, killers
    assert result["stock"][0]["false_kills"] == []
    assert "mutation score 2/2 = 100%" in r.stdout


def test_a_flaky_findings_pass_is_no_false_kill():
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        zoo = importlib.import_module("mutants")
    finally:
        sys.path.remove(str(REPO_ROOT / "scripts"))

    def run(outcome):
        return zoo.Run(records=[{"nodeid": "properties/test_u.py::test_u[quinn-newreno]", "outcome": outcome,
                                 "duration_s": 1.0}], wall_s=1.0, returncode=0)

    # xpassed: a non-strict (flaky) finding passed; a strict one that passes is "failed".
    assert zoo.Stock("quinn", "newreno", [run("passed"), run("xpassed")]).false_kills() == []
    assert zoo.Stock("quinn", "newreno", [run("passed"), run("failed")]).false_kills() == ["properties/test_u.py::test_u"]
    # ... and a pass: a property whose finding did not show in any stock run can kill
    # (a mutant's failure matching the finding's signature xfails and kills nothing).
    assert zoo.Stock("quinn", "newreno", [run("passed"), run("xpassed")]).passed_always() == ["properties/test_u.py::test_u"]
    assert zoo.Stock("quinn", "newreno", [run("passed"), run("xfailed")]).passed_always() == []



def test_stock_runs_already_in_the_output_are_kept_when_asked(tmp_path, monkeypatch):
    zoo = _zoo()
    d = tmp_path / "stock-aioquic-newreno-1"
    d.mkdir()
    (d / "verdicts.ndjson").write_text(json.dumps({"nodeid": "properties/test_u.py::test_u[aioquic-newreno]",
                                                   "outcome": "passed", "duration_s": 1.0}) + "\n")
    ran = []
    monkeypatch.setattr(zoo, "run_pytest", lambda *a, **k: ran.append(a) or zoo.Run([], 0.0, 0))
    kept = zoo.run_stock("aioquic", "newreno", 2, ["p"], tmp_path, "ci", report=False, reuse=True)
    assert kept.runs[0].outcomes() == {"properties/test_u.py::test_u": "passed"}
    assert len(ran) == 1, "the second run was not there: it runs"
    zoo.run_stock("aioquic", "newreno", 1, ["p"], tmp_path, "ci", report=False)
    assert len(ran) == 2, "without reuse every stock run runs again"


def _zoo():
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        return importlib.import_module("mutants")
    finally:
        sys.path.remove(str(REPO_ROOT / "scripts"))


def test_only_a_property_assertion_on_a_completed_transfer_is_a_kill():
    """Issue 27: a harness error, a crash or a transfer that never finished is no kill."""
    zoo = _zoo()
    rec = {"nodeid": "properties/test_w.py::test_w[aioquic-newreno]", "outcome": "failed"}
    assert zoo.is_verdict(rec | {"message": "AssertionError: aioquic-newreno: cwnd 1200 < kMinimumWindow 2504"})
    assert not zoo.is_verdict(rec | {"message": "AssertionError: aioquic-newreno: transfer failed: client exited 1"})
    assert not zoo.is_verdict(rec | {"message": "harness.model.tlc.TlcError: TLC timed out"})
    assert not zoo.is_verdict(rec | {"message": None})
    # The properties' checks raise deviations (harness/verdict/deviation.py).
    assert zoo.is_verdict(rec | {"message": "Deviation_beta: quinn-newreno: reduction 1 of 2 … [deviation: beta]"})
    assert not zoo.is_verdict(rec | {"message": "Deviation_transfer_failed: aioquic-newreno: transfer failed: x"})
    assert not zoo.is_verdict(rec | {"outcome": "error", "message": "AssertionError: x"})


def test_a_mutant_is_equivalent_only_where_its_stock_failed(tmp_path, monkeypatch):
    """A property the stock was merely inconclusive on leaves the mutant undecided,
    never equivalent; errors are reported apart."""
    zoo = _zoo()
    prop = "properties/test_u.py::test_u"

    def run(outcome, message=None):
        return zoo.Run(records=[{"nodeid": f"{prop}[aioquic-newreno]", "outcome": outcome, "duration_s": 1.0,
                                 "time_to_failure_s": 1.0, "example": None, "message": message}],
                       wall_s=1.0, returncode=0)

    failing = run("failed", "AssertionError: aioquic-newreno: the window grew while app-limited")
    mutant = zoo.Mutant("m", "aioquic", "tests.mutants.m:M", "newreno", "a bug")
    # The stock passed nothing, so only the equivalence run runs.
    calls = iter([failing])
    monkeypatch.setattr(zoo, "run_pytest", lambda *a, **k: next(calls))
    undecided = zoo.run_mutant(mutant, zoo.Stock("aioquic", "newreno", [run("skipped")]), tmp_path, "ci", False)
    assert undecided.undecided_by == [prop] and undecided.equivalent_by == [] and undecided.killed_by is None
    calls = iter([failing])
    equivalent = zoo.run_mutant(mutant, zoo.Stock("aioquic", "newreno", [run("xfailed")]), tmp_path, "ci", False)
    assert equivalent.equivalent_by == [prop] and equivalent.undecided_by == []
    assert equivalent.status == "survived", "sharing a failure its stock has is no equivalence by itself"
    calls = iter([failing])
    own = zoo.Mutant("m", "aioquic", "tests.mutants.m:M", "newreno", "a bug", bug_property=prop)
    equivalent = zoo.run_mutant(own, zoo.Stock("aioquic", "newreno", [run("xfailed")]), tmp_path, "ci", False)
    assert equivalent.status == "equivalent", "its stock fails the very property its bug breaks"
    assert undecided.status == "undecided"
    crashing = run("failed", "ConnectionResetError: the endpoint crashed")
    calls = iter([crashing])
    errored = zoo.run_mutant(mutant, zoo.Stock("aioquic", "newreno", [run("passed")]), tmp_path, "ci", False)
    assert errored.killed_by is None and errored.errors and "ConnectionResetError" in errored.errors[0]


def test_the_zoo_reads_a_deviation_as_the_property_s_own_failure():
    """A property's check raises a deviation, also inside Hypothesis' groups; the
    zoo's record keeps it as the message its kill rule reads."""
    import types

    from tests.mutants import zoo_plugin

    report = types.SimpleNamespace(longreprtext=(
        "  | Traceback (most recent call last):\n"
        "  | harness.verdict.deviation.Deviation_standing_queue: quinn-bbr: median 1.96 BDP [deviation: standing-queue]\n"))
    assert zoo_plugin._message(report).startswith("Deviation_standing_queue: quinn-bbr")
    flat = types.SimpleNamespace(longreprtext="E   harness.verdict.deviation.Deviation_beta: x [deviation: beta]\n")
    assert zoo_plugin._message(flat) == "Deviation_beta: x [deviation: beta]"


def test_a_kill_counts_only_where_the_stock_passes_the_same_example(tmp_path, monkeypatch):
    """Issue 27: the killing example is replayed on the stock controller; a schedule
    the stock fails too (or cannot decide) kills nothing, and the mutant's run goes
    on with the properties it has not run yet."""
    zoo = _zoo()
    first, second = "properties/test_a.py::test_a", "properties/test_b.py::test_b"

    def rec(prop, outcome, message=None):
        return {"nodeid": f"{prop}[aioquic-newreno]", "outcome": outcome, "duration_s": 1.0,
                "time_to_failure_s": 1.0, "example": str(tmp_path / prop.split("::")[-1]), "message": message}

    stock = zoo.Stock("aioquic", "newreno", [zoo.Run([rec(first, "passed"), rec(second, "passed")], 2.0, 0)])
    mutant = zoo.Mutant("m", "aioquic", "tests.mutants.m:M", "newreno", "a bug")
    asked: list[list[str]] = []
    runs = iter([zoo.Run([rec(first, "failed", "Deviation_beta: x")], 1.0, 1),
                 zoo.Run([rec(second, "failed", "Deviation_one_reduction: y")], 1.0, 1)])

    def run_pytest(label, stack, cc, targets, *a, **k):
        asked.append(list(targets))
        return next(runs)

    monkeypatch.setattr(zoo, "run_pytest", run_pytest)
    replays = iter([("failed", 3.0), ("passed", 2.0)])
    monkeypatch.setattr(zoo, "replay_on_stock", lambda kill, cc: next(replays))
    v = zoo.run_mutant(mutant, stock, tmp_path, "ci", False)
    assert asked[1] == [second], "the run goes on after a failure the stock shares, with what it has not run"
    assert v.killed_by["nodeid"].startswith(second) and v.killed_by["stock_replay"] == "passed"
    assert v.unconfirmed == ["test_a: stock failed on the same example"]
    assert zoo.Verdict.from_json(mutant, json.loads((tmp_path / "m" / "mutant.json").read_text())) == v

    # Had the stock failed the second example too, the mutant would have survived.
    runs = iter([zoo.Run([rec(first, "failed", "Deviation_beta: x")], 1.0, 1),
                 zoo.Run([rec(second, "failed", "Deviation_one_reduction: y")], 1.0, 1)])
    replays = iter([("failed", 3.0), ("failed", 2.0)])
    v = zoo.run_mutant(mutant, stock, tmp_path, "ci", False)
    assert v.killed_by is None and len(v.unconfirmed) == 2
    assert "SURVIVED (test_a: stock failed" in zoo.table([v], [], markdown=False)

    # Had the stock's trigger not happened on the second example (not exercised, no
    # verdict), the property caught the mutant where nothing says the stock would
    # pass: undecided, not scored, never "survived".
    runs = iter([zoo.Run([rec(first, "failed", "Deviation_beta: x")], 1.0, 1),
                 zoo.Run([rec(second, "failed", "Deviation_one_reduction: y")], 1.0, 1)])
    replays = iter([("failed", 3.0), ("undecided", 2.0)])
    v = zoo.run_mutant(mutant, stock, tmp_path, "ci", False)
    assert v.killed_by is None and v.status == "undecided" and v.undecided_by == [second]
