"""Mixed pairs (issue 20): one stack serves and sends, another fetches. The sender is
judged against another stack's receiver, its client's qlog is read in the client's own
dialect, and the pair is recorded so a replay runs the same two stacks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import skip_or_fail
from harness import endpoints
from harness.observe import qlog
from harness.run import Example, Target, mode_for
from harness.schedule import TransferPlan
from harness.testbed.contract import peer_env
from harness.virtual import RealTimeOnly

FIXTURES = Path(__file__).parent / "fixtures" / "qlog"
CLI = [sys.executable, "-m", "harness.cli"]


def test_the_client_keeps_the_senders_controller_where_it_has_it():
    tquic, quinn = endpoints.load("tquic"), endpoints.load("quinn")
    assert peer_env(quinn, "cubic") == {"LL_CC": "cubic"}
    assert peer_env(quinn, "reno") == {"LL_CC": "newreno"}
    # tquic has no NewReno: its client falls back to its default rather than refusing.
    assert peer_env(tquic, "newreno") == {"LL_CC": None}


def test_a_pair_has_its_own_id_and_keeps_the_senders():
    quiche, quinn = endpoints.load("quiche"), endpoints.load("quinn")
    pair = Target(quiche, quiche.resolve_cc("cubic"), quinn)
    assert (pair.id, pair.sender_id) == ("quiche-cubic-to-quinn", "quiche-cubic")
    assert Target(quiche, quiche.resolve_cc("cubic")).id == "quiche-cubic"


def test_an_example_remembers_its_client():
    from harness.schedule import Schedule

    ex = Example("p::t[quiche-cubic-to-quinn]", "quiche", "cubic", Schedule.from_json(
        {"seed": 1, "phases": [{"start_us": 0, "c2s": {"rate_bps": 10_000_000}, "s2c": {"rate_bps": 10_000_000}}]}),
        TransferPlan(sizes=(1000,), direction="upload"), peer="quinn")
    back = Example.from_json(json.loads(json.dumps(ex.to_json())))
    assert back.peer == "quinn" and back.plan.direction == "upload" and back == ex
    solo = Example.from_json({k: v for k, v in ex.to_json().items() if k != "peer"})
    assert solo.peer is None


def test_a_pair_runs_in_real_time_and_says_so_when_virtual_is_asked():
    quinn, quiche = endpoints.load("quinn"), endpoints.load("quiche")
    pair = Target(quinn, quinn.resolve_cc("cubic"), quiche)
    plan = TransferPlan(sizes=(100_000,))
    assert mode_for(pair, plan, "auto") == "real"
    with pytest.raises(RealTimeOnly, match="mixed pair"):
        mode_for(pair, plan, "virtual")
    assert mode_for(Target(quinn, quinn.resolve_cc("cubic")), plan, "auto") == "virtual"


def test_each_vantage_is_read_in_its_own_stacks_dialect(tmp_path):
    """A quinn client's qlog beside a tquic server's: result.json's peer_stack
    sends the client's file through quinn's dialect (RTTs in seconds)."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "tquic" / "cubic", run)
    shutil.rmtree(run / "client")
    shutil.copytree(FIXTURES / "quinn" / "cubic" / "client", run / "client")
    result = json.loads((run / "result.json").read_text())
    (run / "result.json").write_text(json.dumps(result | {"peer_stack": "quinn"}))
    traces = qlog.read_run(run, "tquic")
    (client,), (server,) = traces["client"], traces["server"]
    assert (client.stack, server.stack) == ("quinn", "tquic")
    assert any("seconds" in n for n in client.notes), client.notes
    assert any(n.startswith("tquic:") for n in server.notes), server.notes


@pytest.mark.parametrize("args,needle", [
    (["--impl", "quinn", "--client", "nosuch"], "--client: unknown stack 'nosuch'"),
    (["--impl", "quinn", "--client", "quiche", "--mode", "virtual"], "real time on the local backend"),
])
def test_bad_pairs_are_one_clear_line(args, needle, tmp_path):
    r = subprocess.run([*CLI, "transfer", *args, "--rate", "10mbit", "--rtt", "20ms", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.netns
def test_a_tquic_server_sends_to_a_quinn_client(netns_ready, tmp_path):
    """The pair's transfer completes through a lossy link, the client really is
    quinn, and the sender's trace and report are tquic's."""
    for name in ("tquic", "quinn"):
        if not endpoints.load(name).is_built():
            skip_or_fail(f"{name} is not built; run `make setup`")
    out = tmp_path / "pair"
    r = subprocess.run([*CLI, "transfer", "--impl", "tquic", "--client", "quinn", "--bytes", "1MB", "--rate",
                        "20mbit", "--rtt", "40ms", "--loss", "0.01", "--out", str(out)],
                       capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "to quinn's client" in r.stdout
    result = json.loads((out / "result.json").read_text())
    assert result["ok"] and result["peer_stack"] == "quinn" and result["stack"] == "tquic"
    versions = {side: json.loads((out / side / "app.ndjson").read_text().splitlines()[0])["stack"]
                for side in ("client", "server")}
    assert versions == {"client": "quinn", "server": "tquic"}
    traces = qlog.read_run(out, "tquic")
    assert traces["client"][0].stack == "quinn" and traces["server"][0].stack == "tquic"
    assert list((out / "report").glob("tquic-server-cwnd.png"))


def test_a_pairs_sender_carries_its_findings():
    from harness.verdict.findings import case_keys

    quiche, quinn = endpoints.load("quiche"), endpoints.load("quinn")
    solo = Target(quiche, quiche.resolve_cc("cubic"))
    pair = Target(quiche, quiche.resolve_cc("cubic"), quinn)
    assert case_keys("t", "quiche-cubic-4", solo) == [("t", "quiche-cubic-4"), ("t", "quiche-cubic")]
    assert case_keys("t", "quiche-cubic-to-quinn-4", pair) == [
        ("t", "quiche-cubic-to-quinn-4"), ("t", "quiche-cubic-to-quinn"), ("t", "quiche-cubic-4"), ("t", "quiche-cubic")]
