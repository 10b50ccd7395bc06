"""Where cases run in time (issue 22): --mode auto, the default, puts each case in
virtual time where its stack and property allow it and in real time otherwise, says
which mode judged it, and a replay can move an example to another controller.

Fast: no namespaces; one virtual-time property run of a few seconds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.endpoints import load
from harness.run import Example, RealTimeOnly, Target, mode_for
from harness.schedule import LinkSettings, Schedule, TransferPlan
from harness.testbed.link import REPO_ROOT
from harness.virtual.recheck import MODE, choose_modes

PLAN = TransferPlan(sizes=(1000,))
WITH_TCP = TransferPlan(sizes=(1000,), tcp_flows=1)


def target(stack: str, cc: str | None = None) -> Target:
    s = load(stack)
    return Target(s, s.resolve_cc(cc))


def test_auto_is_virtual_where_stack_and_plan_allow_it_and_real_elsewhere():
    assert mode_for(target("aioquic"), PLAN, "auto") == "virtual"
    assert mode_for(target("aioquic"), WITH_TCP, "auto") == "real", "competing kernel TCP needs real time"
    assert mode_for(target("quic-go"), PLAN, "auto") == "real", "quic-go has no virtual backend"
    assert mode_for(target("aioquic"), PLAN, "real") == "real"
    assert mode_for(target("aioquic"), PLAN, "virtual") == "virtual"
    with pytest.raises(RealTimeOnly, match="kernel TCP"):
        mode_for(target("aioquic"), WITH_TCP, "virtual")
    with pytest.raises(RealTimeOnly, match="quic-go"):
        mode_for(target("quic-go"), PLAN, "virtual")


def test_an_example_keeps_the_mode_it_ran_in():
    schedule = Schedule.constant(0, LinkSettings(rate_bps=5_000_000, delay_us=10_000))
    e = Example("n", "aioquic", "newreno", schedule, PLAN, 30.0, "virtual")
    assert Example.from_json(json.loads(json.dumps(e.to_json()))) == e
    old = e.to_json()
    del old["mode"]
    assert Example.from_json(old).mode == "real", "examples saved before modes ran in real time"


class _Item:
    """As much of a pytest item as choose_modes reads."""

    def __init__(self, stack: str, marker: str | None = None):
        self.callspec = type("Callspec", (), {"params": {"target": target(stack)}})()
        self.marker = pytest.mark.real_time_only(marker).mark if marker else None
        self.stash = pytest.Stash()
        self.added: list = []

    def get_closest_marker(self, name):
        return self.marker if name == "real_time_only" else None

    def add_marker(self, mark):
        self.added.append(mark)


def test_choose_modes_runs_real_time_cases_in_real_time_under_auto_and_skips_them_under_virtual():
    items = [_Item("aioquic"), _Item("aioquic", "the baseline is kernel TCP"), _Item("quic-go")]
    choose_modes(items, "auto")
    assert [i.stash[MODE] for i in items] == ["auto", "real", "real"]
    assert not any(i.added for i in items), "auto skips nothing"
    items = [_Item("aioquic"), _Item("aioquic", "the baseline is kernel TCP"), _Item("quic-go")]
    choose_modes(items, "virtual")
    assert [i.stash[MODE] for i in items] == ["virtual", "real", "real"]
    assert [bool(i.added) for i in items] == [False, True, True]
    assert items[1].added[0].kwargs["reason"] == "real time only: the baseline is kernel TCP"
    items = [_Item("aioquic"), _Item("quic-go")]
    choose_modes(items, "real")
    assert [i.stash[MODE] for i in items] == ["real", "real"] and not any(i.added for i in items)


def test_the_default_mode_judges_a_sans_io_stack_in_virtual_time_and_says_so(tmp_path):
    results = tmp_path / "r.ndjson"
    argv = [sys.executable, "-m", "pytest", "properties/test_window.py::test_cwnd_never_below_minimum_window",
            "--impl", "aioquic", "--cc", "newreno", "--hypothesis-profile", "ci", "-q", "-p", "no:cacheprovider",
            "--artifacts", str(tmp_path / "a"), "--results", str(results)]
    r = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
                       env={k: v for k, v in __import__("os").environ.items() if k != "LONGLOOK_MODE"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (rec,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert (rec["mode"], rec["mode_option"], rec["outcome"]) == ("virtual", "auto", "passed")
    assert rec["examples"]["judged"] > 0


def test_replay_moves_an_example_to_another_controller_of_its_stack():
    from harness import cli
    from harness.schedule import units

    example = {"nodeid": "properties/test_f.py::test_f[aioquic-tests.mutants.beta_0_9_Beta09-4]",
               "stack": "aioquic", "cc": "tests.mutants.beta_0_9:Beta09"}
    assert cli._on_controller(example, "newreno") == "properties/test_f.py::test_f[aioquic-newreno-4]"
    with pytest.raises(units.UnitError, match="has no congestion control"):
        cli._on_controller(example, "vegas")
    with pytest.raises(units.UnitError, match="does not name the saved target"):
        cli._on_controller(example | {"nodeid": "properties/test_f.py::test_f[quinn-newreno]"}, "newreno")


def test_only_an_example_that_ran_in_virtual_time_is_rechecked_in_real_time(tmp_path):
    from harness.virtual.recheck import ran_in_virtual_time

    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "example.json").write_text(json.dumps({"mode": "virtual"}))
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "example.json").write_text(json.dumps({"mode": "real"}))
    assert ran_in_virtual_time(tmp_path / "v")
    assert not ran_in_virtual_time(tmp_path / "r"), "a real-time example needs no real-time recheck"
    assert not ran_in_virtual_time(tmp_path / "gone")


def test_the_reordering_property_runs_in_real_time_where_virtual_time_hides_its_bug():
    """Virtual time delivers a held datagram with those that overtook it in one
    instant: the kPacketThreshold-1 mutant passes the property there (and fails it in
    real time), so auto must run it in real time until virtual time shows it."""
    from properties.test_reordering import test_reordering_below_threshold_causes_no_recovery as prop

    marks = [m for m in getattr(prop, "pytestmark", []) if m.name == "real_time_only"]
    assert marks and "virtual instant" in marks[0].args[0]


def test_an_example_keeps_its_padded_certificate():
    from dataclasses import replace

    schedule = Schedule.constant(0, LinkSettings(rate_bps=5_000_000, delay_us=10_000))
    e = Example("n", "aioquic", "newreno", schedule, replace(PLAN, cert_padding=4_000), 30.0, "virtual")
    assert Example.from_json(json.loads(json.dumps(e.to_json()))).plan.cert_padding == 4_000
    assert "cert_padding" not in Example("n", "aioquic", "newreno", schedule, PLAN, 30.0).to_json()["plan"]


def test_an_example_keeps_its_window_cap_and_runs_with_it(monkeypatch, tmp_path):
    """A plan's window cap survives the example's JSON (a replay sets it too) and
    reaches the endpoint as its options' max_window (LL_MAX_WINDOW)."""
    from dataclasses import replace

    import harness.virtual
    from harness.run import run_example

    schedule = Schedule.constant(0, LinkSettings(rate_bps=5_000_000, delay_us=10_000))
    e = Example("n", "aioquic", "newreno", schedule, replace(PLAN, window_cap=20_032), 30.0, "virtual")
    again = Example.from_json(json.loads(json.dumps(e.to_json())))
    assert again.plan.window_cap == 20_032
    assert "window_cap" not in Example("n", "aioquic", "newreno", schedule, PLAN, 30.0).to_json()["plan"]
    seen = []

    def transfer(schedule, out, stack, plan, opts):
        seen.append(opts.max_window)
        return type("R", (), {"unsupported": False})()

    monkeypatch.setattr(harness.virtual, "transfer", transfer)

    aioquic = load("aioquic")
    run_example(again, Target(aioquic, aioquic.cc["newreno"]), tmp_path)
    assert seen == [20_032]
