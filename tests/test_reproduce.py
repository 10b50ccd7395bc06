"""`longlook reproduce`: the experiments' conditions against the seed studies, the
resumable cache, the table, and bad arguments."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness import cli
from harness.report import reproduction as table
from harness.reproduce import experiments, sweep

SEED_RESULTS = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "seed-results.md"


def _seed_tables() -> dict[str, list[list[float]]]:
    """Connectify's three tables from the reference, by the heading line above each."""
    if not SEED_RESULTS.exists():
        pytest.skip(f"{SEED_RESULTS} is not beside the repository (CI puts ../shared there)")
    tables, heading = {}, None
    for line in SEED_RESULTS.read_text().splitlines():
        if line.startswith(("Loss sweep", "RTT sweep", "Bandwidth sweep")):
            heading = line.split(" ")[0]
            tables[heading] = []
        elif heading and re.match(r"^\| [0-9.]+ \|", line):
            tables[heading].append([float(c) for c in line.strip("| ").split(" | ")])
        elif heading and not line.startswith("|"):
            heading = None
    return tables


@pytest.mark.parametrize("name,heading", [("connectify-loss", "Loss"), ("connectify-rtt", "RTT"),
                                          ("connectify-rate", "Bandwidth")])
def test_connectify_points_and_figures_match_the_reference(name, heading):
    rows = _seed_tables()[heading]
    e = experiments.EXPERIMENTS[name]
    assert [p.x for p in e.points] == [r[0] for r in rows]
    for p, (x, qt, qm, ht, hm) in zip(e.points, rows):
        assert p.published == {"QUIC": (qt, qm), "HTTP": (ht, hm)}
    assert e.size_bytes == 10_000_000


def test_connectify_conditions_are_the_studys():
    loss = experiments.EXPERIMENTS["connectify-loss"]
    assert {(p.rate_bps, p.rtt_us) for p in loss.points} == {(5_000_000, 160_000)}
    assert [p.loss for p in loss.points] == [0, 0.001, 0.005, 0.01, 0.03, 0.05]
    rtt = experiments.EXPERIMENTS["connectify-rtt"]
    assert {(p.rate_bps, p.loss) for p in rtt.points} == {(10_000_000, 0.0)}
    assert [p.rtt_us for p in rtt.points] == [80_000, 160_000, 320_000, 480_000, 640_000, 800_000]
    rate = experiments.EXPERIMENTS["connectify-rate"]
    assert {(p.rtt_us, p.loss) for p in rate.points} == {(20_000, 0.0)}
    assert [p.rate_bps for p in rate.points] == [x * 1_000_000 for x in (2, 5, 10, 20, 30, 50, 70)]
    qir = experiments.EXPERIMENTS["qir-goodput"]
    s = sweep.schedule(qir, qir.points[0], seed=1).phases[0].s2c
    assert (s.rate_bps, s.delay_us, s.queue_bytes, s.loss) == (10_000_000, 15_000, 25 * 1500, None)
    for e in experiments.EXPERIMENTS.values():
        assert set(e.quick) <= {p.x for p in e.points}


def test_the_schedule_is_the_points_link_each_way():
    e = experiments.EXPERIMENTS["connectify-loss"]
    sched = sweep.schedule(e, e.point(1), seed=3)
    ph = sched.phases[0]
    assert ph.c2s == ph.s2c and ph.s2c.delay_us == 80_000 and ph.s2c.loss.p == 0.01
    assert ph.s2c.queue_bytes == 100_000  # one BDP of 5 Mbit/s × 160 ms
    # The timeout grows with loss, so a loss-limited TCP has time to finish.
    assert sweep.timeout_s(e, e.point(5)) > 4 * sweep.timeout_s(e, e.point(0))


def _fake(calls: list):
    def transfer(run, rundir):
        calls.append(run.key(experiments.EXPERIMENTS["qir-goodput"]))
        rundir.mkdir(parents=True)
        (rundir / "artifact").write_text("x")
        if run.stack == "bad":
            return {"mode": "real", "ok": False, "duration_s": 0.0, "goodput_bps": 0, "reason": "timed out"}
        d = 8.0 + run.index
        return {"mode": "virtual", "ok": True, "duration_s": d, "goodput_bps": 80_000_000 / d, "reason": ""}
    return transfer


def test_a_second_sweep_runs_nothing_and_an_interrupted_one_resumes(tmp_path):
    e = experiments.EXPERIMENTS["qir-goodput"]
    todo = sweep.plan(e, [("aioquic", "newreno", None)], 3, (10,))
    calls: list = []
    # Interrupted after the second run: the first two are on disk, the third is not.
    interrupted = _fake(calls)

    def stop_at_third(run, rundir):
        if run.index == 2:
            raise KeyboardInterrupt
        return interrupted(run, rundir)

    with pytest.raises(KeyboardInterrupt):
        sweep.sweep(e, todo, tmp_path, stop_at_third)
    assert len(sweep.done(tmp_path / "runs.ndjson")) == 2
    calls.clear()
    records = sweep.sweep(e, todo, tmp_path, _fake(calls))
    assert [c.split("|")[3] for c in calls] == ["2"]  # only the missing run
    assert [r["run"] for r in records] == [0, 1, 2]
    calls.clear()
    sweep.sweep(e, todo, tmp_path, _fake(calls))
    assert calls == []
    assert not any((tmp_path / "runs").iterdir())  # artifacts go once the record is written
    # A torn last line (a kill mid-write) is skipped, not fatal.
    with (tmp_path / "runs.ndjson").open("a") as f:
        f.write('{"key": "qir')
    assert len(sweep.done(tmp_path / "runs.ndjson")) == 3


def test_a_browser_client_is_its_own_column_and_its_own_cache_key(tmp_path):
    e = experiments.EXPERIMENTS["connectify-loss"]
    todo = sweep.plan(e, [("aioquic", "newreno", None), ("aioquic", "newreno", "chromium")], 1, (0,))
    assert todo[0].key(e) == "connectify-loss|aioquic-newreno|0|0|10000000"  # as before peers were kept
    assert todo[1].key(e) == "connectify-loss|aioquic-newreno-to-chromium|0|0|10000000"
    records = sweep.sweep(e, todo, tmp_path, _fake([]))
    assert [r.get("peer") for r in records] == [None, "chromium"]
    cells = table.summarise(e, records)
    assert set(cells) == {(0, "aioquic-newreno"), (0, "aioquic-newreno-to-chromium")}
    assert "aioquic-newreno-to-chromium" in table.markdown(e, records)


def test_the_table_puts_medians_beside_the_published_columns(tmp_path):
    e = experiments.EXPERIMENTS["connectify-loss"]
    todo = sweep.plan(e, [("aioquic", "newreno", None), ("bad", "cubic", None)], 3, (0, 1))
    records = sweep.sweep(e, todo, tmp_path, _fake([]))
    text = table.markdown(e, records)
    row0 = next(line for line in text.splitlines() if line.startswith("| 0 |"))
    assert "18.59 s, 4.303" in row0 and "18.288 s, 4.374" in row0  # the 2013 QUIC and HTTP columns
    assert "9.00 s 8.89 Mbit/s [8.00–10.00, sd 1.00] (virtual, n=3)" in row0  # median of 8, 9, 10 s
    assert "failed ×3 (real)" in row0
    png = table.plot(e, records, tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv,says", [
    (["reproduce", "no-such", "--out", "X"], "unknown experiment 'no-such'"),
    (["reproduce", "prudentia-fairness", "--mode", "virtual", "--out", "X"], "runs two stacks' downloads at once"),
    (["reproduce", "prudentia-fairness", "--client", "chromium", "--out", "X"], "pairs each stack's own client"),
    (["reproduce", "kakhki-fairness", "--mode", "virtual", "--out", "X"], "which only real time can"),
    (["reproduce", "zhang-1gbit", "--mode", "virtual", "--out", "X"], "measures CPU per side"),
    (["reproduce", "connectify-loss", "--impl", "no-such-stack", "--out", "X"], "unknown stack 'no-such-stack'"),
    (["reproduce", "connectify-loss", "--impl", "tcp", "--mode", "virtual", "--out", "X"], "real time only"),
    (["reproduce", "connectify-loss", "--runs", "0", "--out", "X"], "--runs 0"),
    (["reproduce", "connectify-loss"], "--out DIR is required"),
    (["reproduce"], "name an experiment"),
    (["reproduce", "connectify-loss", "--client", "caddy", "--out", "X"], "caddy is a server only"),
    (["reproduce", "connectify-loss", "--client", "chromium", "--mode", "virtual", "--out", "X"],
     "a pair with another client runs in real time"),
])
def test_bad_arguments_say_what_to_fix(argv, says, capsys, tmp_path):
    argv = [str(tmp_path / "out") if a == "X" else a for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_list_names_every_experiment(capsys):
    assert cli.main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for name in [*experiments.EXPERIMENTS, *experiments.PLANNED]:
        assert name in out


def _line(dir_, flow, sport, dport, size, dep_us, proto="udp"):
    return json.dumps({"dir": dir_, "idx": 0, "fidx": 0, "flow": flow, "proto": proto, "sport": sport,
                       "dport": dport, "size": size, "arr_us": max(0.0, dep_us - 1.0), "fate": "delivered",
                       "reason": None, "dep_us": dep_us, "qbytes": 0, "marks": []})


def test_shares_are_each_flows_throughput_while_the_transfer_runs(tmp_path):
    from harness.reproduce.flows import shares_mbps
    from harness.schedule import Flow

    lines = [json.dumps({"longlook_link": "test"})]
    # QUIC: 1000 B every ms from 0 to 1 s (8 Mbit/s); two iperf3 streams, 500 and 250 B a
    # ms; the control connection a few bytes; a TCP packet after the transfer does not count.
    for ms in range(1001):
        t = ms * 1000.0
        lines.append(_line("s2c", "udp 198.19.0.1:4433>198.18.0.1:40000", 4433, 40000, 1000, t))
        lines.append(_line("s2c", "tcp 198.19.0.1:50001>198.18.0.1:5201", 50001, 5201, 500, t, "tcp"))
        lines.append(_line("s2c", "tcp 198.19.0.1:50002>198.18.0.1:5201", 50002, 5201, 250, t, "tcp"))
    lines.append(_line("s2c", "tcp 198.19.0.1:50000>198.18.0.1:5201", 50000, 5201, 60, 10.0, "tcp"))
    lines.append(_line("s2c", "tcp 198.19.0.1:50001>198.18.0.1:5201", 50001, 5201, 10**6, 2e6, "tcp"))
    (tmp_path / "link.ndjson").write_text("\n".join(lines) + "\n")
    got = shares_mbps(tmp_path, Flow("udp", "server", "198.19.0.1", 4433), tcp_flows=2)
    assert got == pytest.approx([8.008, 4.004, 2.002], rel=1e-3)
    # Asked for more flows than ran: as many figures as flows asked for, the missing zero.
    more = shares_mbps(tmp_path, Flow("udp", "server", "198.19.0.1", 4433), tcp_flows=4)
    assert len(more) == 5 and more[-1] == 0.0


def test_the_share_table_puts_each_flow_beside_the_papers():
    e = experiments.EXPERIMENTS["kakhki-fairness"]
    recs = [{"x": 2, "stack": "quinn", "cc": "cubic", "ok": True, "mode": "real", "duration_s": 30.0,
             "goodput_bps": 2.5e6, "flows_mbps": [2.0 + i, 1.0, 0.5]} for i in range(3)]
    text = table.markdown(e, recs)
    row = next(line for line in text.splitlines() if line.startswith("| 2 |"))
    assert "2.8 (1.16) · TCP 0.7 (0.21), 0.96 (0.3)" in row
    assert "3.00 (1.00) · TCP 1.00 (0.00), 0.50 (0.00) (real, n=3)" in row


def test_an_experiment_without_published_figures_has_an_empty_published_column(tmp_path):
    e = experiments.EXPERIMENTS["qir-crosstraffic"]
    assert e.points[0].tcp_flows == 1 and e.size_bytes == 25_000_000 and e.queue_bytes == 25 * 1500
    recs = [{"x": 1, "stack": "quinn", "cc": "cubic", "ok": True, "mode": "real", "duration_s": 40.0,
             "goodput_bps": 5e6, "flows_mbps": [5.0, 4.8]}]
    row = next(line for line in table.markdown(e, recs).splitlines() if line.startswith("| 1 |"))
    assert row.startswith("| 1 | – | 5.00 (0.00) · TCP 4.80 (0.00)")
    assert table.plot(e, recs, tmp_path / "c.png").exists()


def test_gordos_drop_and_jitter_links():
    drop = experiments.EXPERIMENTS["gordo-drop"]
    assert [p.x for p in drop.points] == [10, 20, 40, 60, 80, 100, 120] and drop.runs == 10
    sched = sweep.schedule(drop, drop.point(60), seed=1)
    before, after = sched.phases
    assert (before.s2c.rate_bps, after.s2c.rate_bps, after.start_us) == (40_000_000, 4_000_000, 1_000_000)
    assert before.s2c.delay_us == after.s2c.delay_us == 60_000  # the study's delay is one way
    jitter = experiments.EXPERIMENTS["gordo-jitter"]
    assert [p.x for p in jitter.points] == [0, 10, 20, 40, 50]
    s = sweep.schedule(jitter, jitter.point(40), seed=1).phases[0].s2c
    assert (s.rate_bps, s.delay_us, s.jitter_us, s.jitter_reorders) == (100_000_000, 60_000, 40_000, None)
    assert sweep.schedule(jitter, jitter.point(0), seed=1).phases[0].s2c.jitter_us is None


def test_object_completions_and_their_order(tmp_path):
    from harness.reproduce.flows import kendall_tau, object_completions_s

    (tmp_path / "client").mkdir()
    events = [{"event": "version"}]
    # Three objects asked for at once (streams 0, 4, 8); they complete 8, 0, 4.
    events += [{"t_us": 1000, "event": "request_start", "stream": s, "bytes": 0} for s in (0, 4, 8)]
    events += [{"t_us": t, "event": "request_done", "stream": s, "bytes": 10}
               for s, t in ((8, 201_000), (0, 301_000), (4, 401_000))]
    (tmp_path / "client" / "app.ndjson").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    done = object_completions_s(tmp_path)
    assert done == [0.3, 0.4, 0.2]
    assert kendall_tau([1, 2, 3]) == 1.0 and kendall_tau([3, 2, 1]) == -1.0
    assert kendall_tau(done) == pytest.approx(-1 / 3)
    (tmp_path / "client" / "app.ndjson").write_text("\n".join(json.dumps(e) for e in events[:-1]) + "\n")
    with pytest.raises(ValueError, match="3 requests and 2 completions"):
        object_completions_s(tmp_path)


def test_the_objects_table_tells_sequential_from_round_robin(tmp_path):
    e = experiments.EXPERIMENTS["yu-multiplexing"]
    seq = [round(0.1 * (i + 1), 3) for i in range(10)]   # one after another, in order
    rr = [1.0 - 0.001 * (10 - i) for i in range(10)]     # all near the end
    recs = [{"x": 10, "stack": s, "cc": "newreno", "ok": True, "mode": "virtual", "duration_s": 1.0,
             "goodput_bps": 8e6, "objects_s": o} for s, o in (("seq", seq), ("rr", rr))]
    text = table.markdown(e, recs)
    row = next(line for line in text.splitlines() if line.startswith("| 10 |"))
    assert "last 1.00 s, median object at 0.55 of it, tau 1.00" in row      # sequential
    assert "last 1.00 s, median object at 1.00 of it, tau 1.00" in row      # round-robin
    assert table.plot(e, recs, tmp_path / "y.png").exists()


def test_the_reports_reproductions_page(tmp_path):
    e = experiments.EXPERIMENTS["connectify-loss"]
    sweep.sweep(e, sweep.plan(e, [("aioquic", "newreno", None)], 2, (0, 1)), tmp_path / "cl", _fake([]))
    (tmp_path / "site").mkdir()
    notes: list = []
    assert table.write_page(tmp_path / "site", [tmp_path / "cl"], notes) == 1
    page = (tmp_path / "site" / "reproductions.html").read_text()
    assert "connectify-loss" in page and "18.59 s, 4.303" in page and "reproductions/connectify-loss.png" in page
    assert (tmp_path / "site" / "reproductions" / "connectify-loss.png").exists()
    with pytest.raises(FileNotFoundError, match="no runs.ndjson"):
        table.write_page(tmp_path / "site", [tmp_path / "nothing"], notes)
    assert table.write_page(tmp_path / "site", None, notes) == 0
    assert "--reproductions DIR" in (tmp_path / "site" / "reproductions.html").read_text()


def test_zhangs_points_vary_the_size_and_cells_give_cpu_per_side():
    e = experiments.EXPERIMENTS["zhang-1gbit"]
    assert [sweep.size_of(e, p) for p in e.points] == [50_000_000, 100_000_000, 500_000_000, 1_000_000_000]
    s = sweep.schedule(e, e.points[0], seed=1).phases[0].s2c
    assert s.rate_bps == 1_000_000_000 and s.queue_bytes == 10 * 1_000_000_000 * 2_000 // 8_000_000  # 10 x BDP
    assert e.point(1000).published == {"QUIC": (18.6, 430.1), "HTTP": (9.36, 854.7)}
    keys = {sweep.Run("quinn", "cubic", p, 0).key(e) for p in e.points}
    assert len(keys) == 4  # the size is part of the key
    recs = [{"x": 50, "stack": "quinn", "cc": "cubic", "ok": True, "mode": "real", "duration_s": 2.0,
             "goodput_bps": 2e8, "cpu_s": {"client": 1.0, "server": 1.5}}]
    row = next(line for line in table.markdown(e, recs).splitlines() if line.startswith("| 50 |"))
    assert "CPU client 50 % server 75 % (real, n=1)" in row


def test_zhang_runs_each_switchable_stack_again_with_its_offloads_off(tmp_path):
    """zhang-1gbit's "with and without GSO/GRO": a second column per stack whose
    endpoints (both of them, where a browser receives) declare the switch; the old
    records, without an offload field, keep their column and their cache key."""
    e = experiments.get("zhang-1gbit")
    switchable = {"quinn", "quic-go"}.__contains__
    todo = sweep.plan(e, [("quinn", "cubic", None), ("aioquic", "cubic", None), ("quic-go", "cubic", "chromium")],
                      1, (50,), switchable=switchable)
    assert [r.target for r in todo] == ["quinn-cubic", "quinn-cubic-no-offload", "aioquic-cubic",
                                        "quic-go-cubic-to-chromium"]
    assert todo[0].key(e) == "zhang-1gbit|quinn-cubic|50|0|50000000"
    assert todo[1].key(e) == "zhang-1gbit|quinn-cubic-no-offload|50|0|50000000"
    # Experiments that do not measure offloads never double their runs.
    assert len(sweep.plan(experiments.get("qir-goodput"), [("quinn", "cubic", None)], 1, (10,),
                          switchable=switchable)) == 1
    records = sweep.sweep(e, todo[:2], tmp_path, _fake([]))
    assert [r.get("offload", True) for r in records] == [True, False]
    assert set(table.summarise(e, records)) == {(50, "quinn-cubic"), (50, "quinn-cubic-no-offload")}


def test_offloads_off_reach_only_endpoints_that_declare_the_switch():
    from harness import endpoints
    from harness.schedule import TransferPlan
    from harness.testbed.contract import EndpointOptions, contract_env, unhonoured, unhonoured_by_peer

    off = EndpointOptions(offload=False)
    assert contract_env(off, TransferPlan(sizes=(1,)))["LL_OFFLOAD"] == "off"
    assert "LL_OFFLOAD" not in contract_env(EndpointOptions(), TransferPlan(sizes=(1,)))
    for name in ("quinn", "quic-go", "s2n-quic"):
        assert unhonoured(endpoints.load(name), off) is None, name
    assert "honours.offload" in unhonoured(endpoints.load("quiche"), off)
    assert "receiver" in unhonoured_by_peer(endpoints.load("aioquic"), off)
    # A window cap is the sender's alone: a receiver is never refused for it.
    assert unhonoured_by_peer(endpoints.load("aioquic"), EndpointOptions(max_window=10_000)) is None


def test_a_window_cap_reaches_the_sender_and_limits_its_window(tmp_path):
    """kakhki-window-cap: LL_MAX_WINDOW is a ceiling on aioquic's window, whatever its
    controller writes; the harness refuses it for stacks that do not declare it."""
    from harness import endpoints
    from harness.endpoints.aioquic.window_cap import capped_class, register_capped
    from harness.testbed.contract import EndpointOptions, contract_env, unhonoured

    from aioquic.quic.congestion import cubic  # noqa: F401  (registers "cubic", as a connection's import does)
    from aioquic.quic.congestion.base import create_congestion_control
    from aioquic.quic.congestion.reno import RenoCongestionControl

    cc = capped_class(RenoCongestionControl, 10_000)(max_datagram_size=1252)
    assert cc.congestion_window == 10_000  # the initial window, 12520 B, clamped
    cc.congestion_window = 5_000
    assert cc.congestion_window == 5_000
    name = register_capped("cubic", 3 * 1252)
    assert create_congestion_control(name, max_datagram_size=1252).congestion_window == 3 * 1252
    with pytest.raises(ValueError, match="below two datagrams"):
        register_capped("reno", 1000)
    opts = EndpointOptions(max_window=107 * 1252)
    from harness.schedule import TransferPlan
    assert contract_env(opts, TransferPlan(sizes=(1,)))["LL_MAX_WINDOW"] == str(107 * 1252)
    assert unhonoured(endpoints.load("aioquic"), opts) is None
    assert "honours.max_window" in unhonoured(endpoints.load("quinn"), opts)
    assert unhonoured(endpoints.load("quinn"), EndpointOptions()) is None


def test_the_window_cap_experiment_is_kakhkis_high_bdp_link():
    e = experiments.get("kakhki-window-cap")
    assert {p.window_cap_packets for p in e.points} == {107, 430, 0}
    for p in e.points:
        assert (p.rate_bps, p.rtt_us) == (100 * experiments.MBIT, 100_000)
        # The BDP exceeds both caps, so each binds.
        assert p.rate_bps * p.rtt_us / 8e6 > 430 * experiments.WINDOW_CAP_DATAGRAM


def test_a_point_a_stack_cannot_run_says_unsupported_not_failed():
    e = experiments.get("kakhki-window-cap")
    recs = [{"stack": "tcp", "cc": "cubic", "x": 107, "mode": "real", "ok": False, "unsupported": True,
             "duration_s": 0.0, "goodput_bps": 0, "reason": "a window cap ... unsupported"},
            {"stack": "aioquic", "cc": "newreno", "x": 107, "mode": "virtual", "ok": False, "duration_s": 0.0,
             "goodput_bps": 0, "reason": "timed out"}]
    row = next(line for line in table.markdown(e, recs).splitlines() if line.startswith("| 107 |"))
    assert "unsupported" in row and "failed ×1 (virtual)" in row


def test_pairs_meet_every_later_stack_and_each_rival_once():
    e = experiments.get("prudentia-fairness")
    todo = sweep.plan(e, [("aioquic", "newreno", None), ("quic-go", "newreno", None)], 1, (8,))
    assert [(r.stack, r.rival) for r in todo] == [("aioquic", "quic-go:newreno"), ("aioquic", "tcp:cubic"),
                                                  ("aioquic", "tcp:bbr"), ("quic-go", "tcp:cubic"),
                                                  ("quic-go", "tcp:bbr")]
    assert todo[0].key(e) == "prudentia-fairness|aioquic-newreno-vs-quic-go-newreno|8|0|10000000"
    # Prudentia's conditions: 8 and 50 Mbit/s, 50 ms, a 4-BDP queue.
    assert {(p.rate_bps, p.rtt_us) for p in e.points} == {(8 * experiments.MBIT, 50_000), (50 * experiments.MBIT, 50_000)}
    q = sweep.schedule(e, e.point(8), 1).phases[0].s2c.queue_bytes
    assert q == 4 * 8 * experiments.MBIT * 50_000 // 8_000_000


def test_a_pairs_cell_gives_both_flows_and_the_losers_share(tmp_path):
    e = experiments.get("prudentia-fairness")
    recs = [{"stack": "aioquic", "cc": "newreno", "rival": "tcp:cubic", "x": 8, "mode": "real", "ok": True,
             "duration_s": 20.0, "goodput_bps": 3e6, "flows_mbps": [3.0, 4.6]},
            {"stack": "aioquic", "cc": "newreno", "rival": "tcp:bbr", "x": 8, "mode": "real", "ok": False,
             "unsupported": False, "duration_s": 0.0, "goodput_bps": 0, "reason": "x"}]
    text = table.markdown(e, recs)
    row = next(line for line in text.splitlines() if line.startswith("| 8 |"))
    assert "3.00 (0.00) · 4.60 (0.00) Mbit/s; loser 75 %" in row and "failed ×1 (real)" in row
    png = table.plot(e, recs, tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_two_flows_shares_are_taken_while_both_send(tmp_path):
    from harness.reproduce.flows import pair_shares_mbps
    from harness.schedule import Flow

    lines = [json.dumps({"longlook_link": "test"})]
    lines += [_line("s2c", "udp a:4433>b:50000", 4433, 50000, 1000, t) for t in range(0, 2_000_001, 1000)]  # 8 Mbit/s
    lines += [_line("s2c", "udp a:4434>b:50001", 4434, 50001, 1000, t) for t in range(1_000_000, 3_000_001, 2000)]
    (tmp_path / "link.ndjson").write_text("\n".join(lines) + "\n")
    a, b = pair_shares_mbps(tmp_path, Flow("udp", "server", "x", 4433), Flow("udp", "server", "x", 4434))
    assert abs(a - 8.0) < 0.1 and abs(b - 4.0) < 0.1


def test_objects_larger_than_a_draw_are_written_in_chunks(tmp_path, monkeypatch):
    """zhang-1gbit's 500 MB and 1 GB objects: one randbytes draw of that size
    overflows, so objects are drawn and hashed a chunk at a time; an object within
    one chunk keeps the bytes it always had for its seed."""
    import hashlib
    import random

    from harness.testbed import contract

    small = contract.write_objects(tmp_path / "a", (1000,), seed=7)
    assert (tmp_path / "a" / "object-0-1000.bin").read_bytes() == random.Random(7).randbytes(1000)
    assert small == {"object-0-1000.bin": hashlib.sha256(random.Random(7).randbytes(1000)).hexdigest()}
    monkeypatch.setattr(contract, "OBJECT_CHUNK", 256)
    digests = contract.write_objects(tmp_path / "b", (1000, 0), seed=7)
    data = (tmp_path / "b" / "object-0-1000.bin").read_bytes()
    assert len(data) == 1000 and digests["object-0-1000.bin"] == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "b" / "object-1-0.bin").read_bytes() == b""
