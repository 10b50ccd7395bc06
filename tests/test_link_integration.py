"""longlook-link between two real namespaces: packets do what the ground truth says.

Each test starts the emulator with a schedule, drives traffic with
tests/tools/traffic.py and compares what the endpoints saw with the log.
Needs root (namespaces) and the built binary; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.observe.groundtruth import DROP_REASONS
from harness.observe.groundtruth import read_log
from harness.testbed.link import Link, LinkError, LinkOptions, ScheduleError, check_schedule
from harness.testbed.netns import emulator_pids, list_ours, namespace_pair, pid_alive, sweep_stale
from harness.schedule import Action, FlowSelector, IidLoss, LinkSettings, Phase, Schedule
from lab import SERVER_IP, lab_session, read_json

pytestmark = pytest.mark.netns

UDP_HEADER = 28  # IPv4 + UDP header bytes in the logged size
SLICE_US = 50  # the emulator's default --slice-us
ORPHAN = Path(__file__).parent / "tools" / "orphan_link.py"


def udp_transfer(lab, schedule, port, count, interval_us, idle_s=2.0, options=None):
    """Send ``count`` numbered datagrams c2s through ``schedule``; return (received, log)."""
    out = lab.workdir / f"recv-{port}-{time.monotonic_ns()}.json"
    with lab.link(schedule, options) as link:
        receiver = lab.start_server(["udp-recv", "--bind", SERVER_IP, "--port", str(port),
                                     "--count", str(count), "--idle-s", str(idle_s), "--out", str(out)])
        lab.run_client(["udp-send", "--dest", SERVER_IP, "--port", str(port), "--sport",
                        str(port - 1), "--count", str(count), "--interval-us", str(interval_us)])
        lab.finish(receiver)
    return read_json(out)["received"], read_log(link.log_path)


def test_smoke_udp_ping(lab):
    """A few pings cross both directions with at least the configured delay."""
    with lab.link(Schedule.constant(seed=1, settings=LinkSettings(delay_us=1000))) as link:
        echo = lab.start_server(["udp-echo", "--bind", SERVER_IP, "--port", "7000", "--idle-s", "1"])
        rtts = json.loads(lab.run_client(["udp-ping", "--dest", SERVER_IP, "--port", "7000",
                                          "--count", "5"]))["rtt_ns"]
        lab.finish(echo)
    assert None not in rtts, f"lost pings on a lossless link: {rtts}"
    floor_ns = 2 * (1000 - SLICE_US) * 1000  # two 1 ms delays, each up to a slice early
    assert min(rtts) >= floor_ns, f"round trip {min(rtts)} ns < 2 x 1 ms delay"
    log = read_log(link.log_path)
    for direction in ("c2s", "s2c"):
        fates = [r.fate for r in log.select(direction, "udp", 7000)]
        assert fates == ["delivered"] * 5, f"{direction} fates {fates}"
    assert log.summary is not None, "log has no summary line after SIGTERM"
    assert Schedule.from_json(log.header["schedule"]).seed == 1, "header schedule unreadable"


def test_udp_delivery_matches_ground_truth(lab):
    """Exactly the delivered datagrams arrive, in log order, 10 ms late as logged."""
    port, count = 40001, 500
    schedule = Schedule.constant(seed=11, settings=LinkSettings(delay_us=10_000, loss=IidLoss(0.1)),
                                 actions=[Action("c2s", 7, "drop", flow=FlowSelector("udp", port))])
    # SCHED_FIFO keeps the emulator's own lateness small while other work shares
    # the two cores (its figure: bench/emulator_bench.py).
    received, log = udp_transfer(lab, schedule, port, count, interval_us=2000,
                                 options=LinkOptions(fifo=True))
    records = log.select("c2s", "udp", port)
    assert [r.fidx for r in records] == list(range(count)), "log misses datagrams of the flow"
    assert (records[7].fate, records[7].reason) == ("dropped", "loss_index")
    iid = sum(r.reason == "loss_iid" for r in records)
    assert 20 <= iid <= 90, f"{iid} iid losses of {count} at p=0.1"
    delivered = [r for r in log.records if r in records and r.fate == "delivered"]
    assert [d["seq"] for d in received] == [r.fidx for r in delivered]
    assert all(r.size == 200 + UDP_HEADER for r in records)
    check_one_way_delays(received, delivered, 10_000, log)


def check_one_way_delays(received, delivered, delay_us, log):
    """Logged and measured one-way delays both match ``delay_us`` and each other.

    Times on CLOCK_REALTIME (the header's ``start_unix_ns`` maps the log's µs
    onto it) split each datagram's measured delay into the sender → emulator
    read lag and the emulator's write lag, seen by the kernel receive stamp
    (taken as the emulator writes). ``dep_us`` is the scheduled departure, so
    the write lag is the emulator's lateness: it must agree with the summary's
    lateness histogram, and a packet may leave up to one slice early
    (--slice-us). CLOCK_MONOTONIC stamps in user space check the end-to-end median.
    """
    early_us, slack_us = SLICE_US + 20, 200
    wrong = [(r.fidx, r.delay_us) for r in delivered if r.delay_us != delay_us]
    assert not wrong, f"logged delay (dep_us - arr_us) is not {delay_us} µs: {wrong[:10]}"
    start_ns, lateness = log.header["start_unix_ns"], log.summary["lateness"]
    read_lag = [(start_ns + r.arr_us * 1000 - d["send_real_ns"]) / 1000 for d, r in zip(received, delivered)]
    write_lag = [(d["kernel_real_ns"] - start_ns - r.dep_us * 1000) / 1000 for d, r in zip(received, delivered)]
    assert min(read_lag) >= -slack_us, f"logged arrival {min(read_lag)} µs before the send"
    assert statistics.median(read_lag) <= 1000, f"median sender → emulator lag {statistics.median(read_lag)} µs"
    bad = [(d["seq"], round(lag)) for d, lag in zip(received, write_lag)
           if not -early_us <= lag <= lateness["max_us"] + slack_us]
    assert not bad, f"written off schedule beyond the logged lateness {lateness}: {bad[:10]}"
    # How late the emulator writes is a speed figure, kept by bench/emulator_bench.py
    # (router_lateness, BENCHMARKS.md), not a gate here: on a shared 2-core host a CI run
    # measured p99 3.0 ms. What this test holds is that the log tells that lateness truly.
    user_space = [(d["recv_ns"] - d["send_ns"]) / 1000 for d in received]
    assert min(user_space) >= delay_us - early_us, f"datagram arrived after {min(user_space)} µs"
    assert abs(statistics.median(user_space) - delay_us) <= 1000, f"median {statistics.median(user_space)} µs"


def test_tcp_transfer_through_rate_limit(lab):
    """5 MB of CUBIC TCP at 20 Mbit/s arrive intact; the log accounts for every byte.

    The 30 kB drop-tail queue (about one bandwidth-delay product) overflows in
    slow start, so the log must show queue drops and nothing else.
    """
    port, size, rate, queue = 5201, 5_000_000, 20_000_000, 30_000
    c2s = LinkSettings(rate_bps=rate, delay_us=5000, queue_bytes=queue)
    schedule = Schedule(seed=3, phases=[Phase(0, c2s=c2s, s2c=LinkSettings(delay_us=5000))])
    out = lab.workdir / "tcp.json"
    with lab.link(schedule) as link:
        receiver = lab.start_server(["tcp-recv", "--bind", SERVER_IP, "--port", str(port),
                                     "--idle-s", "30", "--out", str(out)])
        sent = json.loads(lab.run_client(["tcp-send", "--dest", SERVER_IP, "--port", str(port),
                                          "--bytes", str(size), "--cc", "cubic",
                                          "--timeout-s", "60"], timeout_s=90))
        lab.finish(receiver)
    got = read_json(out)
    assert (got["bytes"], got["sha256"]) == (size, sent["sha256"])
    assert sent["elapsed_ns"] / 1e9 >= 0.95 * size * 8 / rate, f"faster than {rate} bit/s: {sent}"
    records = read_log(link.log_path).select("c2s", "tcp", port)
    delivered = [r for r in records if r.fate == "delivered"]
    assert sum(r.size for r in delivered) >= size
    reasons = {r.reason for r in records if r.fate == "dropped"}
    assert reasons == {"queue_full"} and reasons <= set(DROP_REASONS), f"drop reasons {reasons}"
    assert max(r.qbytes for r in records) <= queue, "queue held more than queue_bytes"
    span_s = (delivered[-1].dep_us - delivered[0].dep_us) / 1e6
    assert sum(r.size for r in delivered[1:]) * 8 / span_s <= 1.02 * rate, "log shows rate above limit"


def hold_run(lab, interval_us):
    """Send 20 datagrams, the 11th held behind k=3; return (arrival order, log records)."""
    port = 40003
    schedule = Schedule.constant(seed=5, settings=LinkSettings(delay_us=2000), actions=[
        Action("c2s", 10, "hold", flow=FlowSelector("udp", port), k=3)])
    received, log = udp_transfer(lab, schedule, port, count=20, interval_us=interval_us, idle_s=1.0)
    return [d["seq"] for d in received], log.select("c2s", "udp", port)


HELD_ORDER = [*range(10), 11, 12, 13, 10, *range(14, 20)]


def test_hold_releases_after_k_later_datagrams(lab):
    """Datagram 10, held behind k=3, arrives right after datagrams 11, 12 and 13."""
    order, records = hold_run(lab, interval_us=5000)
    assert order == HELD_ORDER, f"arrival order {order}"
    held = records[10]
    assert held.fate == "delivered" and "held" in held.marks, held
    assert records[13].dep_us <= held.dep_us <= records[14].dep_us, (records[13], held, records[14])


def test_hold_releases_right_after_kth_in_a_burst(lab):
    """In a burst (all 20 due within one slice), 10 still leaves right after 13."""
    order, _ = hold_run(lab, interval_us=0)
    assert order == HELD_ORDER, f"arrival order {order}"


def test_same_schedule_same_arrivals_same_fates(lab):
    """Two runs with one seed give identical fates; another seed gives others."""
    port, count = 40005, 300

    def fates(seed):
        """(fate, reason) per datagram of one run with ``seed``."""
        schedule = Schedule.constant(seed=seed, settings=LinkSettings(delay_us=1000, loss=IidLoss(0.2)))
        received, log = udp_transfer(lab, schedule, port, count, interval_us=1000, idle_s=1.0)
        records = log.select("c2s", "udp", port)
        assert [d["seq"] for d in received] == [r.fidx for r in records if r.fate == "delivered"]
        return [(r.fate, r.reason) for r in records]

    first, second, other = fates(42), fates(42), fates(43)
    assert len(first) == count and ("dropped", "loss_iid") in first and ("delivered", None) in first
    assert first == second, [i for i, (a, b) in enumerate(zip(first, second)) if a != b]
    assert first != other, "seed 43 drew the same fates as seed 42"


def test_check_rejects_out_of_range_loss(link_binary, tmp_path):
    """`longlook-link check` exits 2 naming the file and the bad field (no root needed)."""
    path = tmp_path / "bad-loss.json"
    path.write_text(json.dumps({"seed": 1, "phases": [{"start_us": 0, "c2s": {"loss": {"iid": 1.5}},
                                                        "s2c": {}}]}))
    with pytest.raises(ScheduleError) as info:
        check_schedule(path)
    assert info.value.returncode == 2
    assert str(path) in info.value.message or path.name in info.value.message, info.value.message
    assert "phases[0].c2s.loss.iid" in info.value.message, info.value.message
    good = Schedule.constant(seed=1, settings=LinkSettings(loss=IidLoss(0.5))).write(tmp_path / "ok.json")
    check_schedule(good)


def nothing_left(names, pid):
    """Assert no namespace of ``names`` and no emulator naming them (or ``pid``) remain."""
    assert not set(names) & set(list_ours()), f"namespaces left: {set(names) & set(list_ours())}"
    assert not emulator_pids(set(names)), f"emulators left: {emulator_pids(set(names))}"
    assert not pid_alive(pid), f"emulator pid {pid} still alive"


def test_fixture_leaves_nothing_behind(netns_ready, tmp_path):
    """What the `lab` fixture runs removes its namespaces and stops the emulator."""
    with lab_session(tmp_path) as lab:
        with lab.link(Schedule(seed=1)) as link:
            names, pid = (lab.client, lab.server), link.pid
            assert set(names) <= set(list_ours()) and pid_alive(pid)
    nothing_left(names, pid)
    with pytest.raises(KeyboardInterrupt), namespace_pair() as names:
        raise KeyboardInterrupt
    nothing_left(names, 0)


def test_killed_emulator_is_cleaned_up(netns_ready, tmp_path):
    """An emulator SIGKILLed mid-run is reported, and nothing stays behind."""
    with pytest.raises(LinkError, match="exited by itself"):
        with namespace_pair() as names, Link(Schedule(seed=1), *names, tmp_path) as link:
            os.kill(link.pid, signal.SIGKILL)
            link._proc.wait(timeout=5)
    assert link.returncode == -signal.SIGKILL
    nothing_left(names, link.pid)


def start_orphan(workdir):
    """Start tools/orphan_link.py (SIGINT at its default) and return (process, what it made)."""
    owner = subprocess.Popen([sys.executable, str(ORPHAN), str(workdir)], stdout=subprocess.PIPE,
                             text=True, start_new_session=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    line = owner.stdout.readline()
    if not line:
        owner.kill()
        owner.wait()
        pytest.fail("orphan_link.py made no namespace pair")
    return owner, json.loads(line)


def test_sweep_removes_what_a_killed_run_left(netns_ready, tmp_path):
    """A SIGKILLed owner leaves namespaces and an emulator; sweep_stale removes both."""
    owner, left = start_orphan(tmp_path)
    owner.kill()
    owner.wait()
    names = (left["client"], left["server"])
    assert set(names) <= set(list_ours()) and pid_alive(left["link_pid"]), "orphan left nothing"
    removed = sweep_stale()
    assert set(names) <= set(removed), f"sweep removed {removed}"
    deadline = time.monotonic() + 5
    while pid_alive(left["link_pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    nothing_left(names, left["link_pid"])


def test_ctrl_c_cleans_up(netns_ready, tmp_path):
    """SIGINT (KeyboardInterrupt) in the owner stops the emulator and removes the pair."""
    owner, left = start_orphan(tmp_path)
    owner.send_signal(signal.SIGINT)
    owner.wait(timeout=30)
    nothing_left((left["client"], left["server"]), left["link_pid"])


def ping(lab, port, count=3, first_s=15.0):
    """Round-trip times (ns, None for lost) of ``count`` pings to an echo server."""
    echo = lab.start_server(["udp-echo", "--bind", SERVER_IP, "--port", str(port), "--idle-s", "0.5",
                             "--first-s", str(first_s)])
    out = lab.run_client(["udp-ping", "--dest", SERVER_IP, "--port", str(port), "--count",
                          str(count), "--timeout-s", "0.3"])
    lab.finish(echo)
    return json.loads(out)["rtt_ns"]


def test_control_socket_switches_phase_and_reports_stats(lab):
    """`phase` switches to a blackhole phase and back; `stats` counts what happened."""
    open_phase = Phase.both(LinkSettings(delay_us=1000))
    hole = Phase.both(LinkSettings(blackhole=True), start_us=3_600_000_000)
    with lab.link(Schedule(seed=2, phases=[open_phase, hole])) as link:
        assert None not in ping(lab, 7001), "phase 0 should pass pings"
        link.set_phase(1)
        assert ping(lab, 7002, first_s=2) == [None] * 3, "blackhole phase let pings through"
        link.set_phase(0)
        assert None not in ping(lab, 7003), "back in phase 0 pings should pass"
        stats = link.stats()
    reasons = {r.reason for r in read_log(link.log_path).records if r.fate == "dropped"}
    assert reasons == {"blackhole"}, reasons
    assert "c2s" in json.dumps(stats), f"stats reply without per-direction counters: {stats}"


def test_pcap_holds_the_forwarded_datagrams(lab):
    """With --pcap-dir the capture holds our datagrams, readable by scapy."""
    from scapy.all import UDP, rdpcap

    pcap_dir = lab.workdir / "pcap"
    with lab.link(Schedule(seed=4), LinkOptions(pcap_dir=pcap_dir)):
        assert None not in ping(lab, 7004)
    files = sorted(pcap_dir.iterdir())
    assert files, f"no capture written to {pcap_dir}"
    ports = [p[UDP].dport for f in files for p in rdpcap(str(f)) if UDP in p]
    assert ports.count(7004) >= 3, f"captures {[f.name for f in files]} hold UDP ports {ports}"
