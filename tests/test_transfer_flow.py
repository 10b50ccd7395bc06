"""Issue 24: the run, not a testbed constant, says which flow is the transfer. The
verdicts select the transfer's packets by the recorded flow, and a transfer that is
missing from its own ground truth is a harness error, never a verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.endpoints import load
from harness.observe.groundtruth import read_log
from harness.observe.wire import first_initial_destination, read_wire
from harness.run import Example, Target
from harness.schedule import Flow, LinkSettings, Schedule, TransferPlan
from harness.testbed.contract import TransferResult
from harness.verdict.analysis import transfer_records
from harness.verdict.runner import HarnessError, Observation

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "wire"
STACKS = sorted(p.name for p in FIXTURES.iterdir() if (p / "pcap" / "server.pcap").exists())


def _record(dir: str, flow: str, proto: str, sport: int, dport: int) -> dict:
    return {"dir": dir, "idx": 0, "fidx": 0, "flow": flow, "proto": proto, "sport": sport, "dport": dport,
            "size": 1200, "arr_us": 0.0, "fate": "delivered", "reason": None, "dep_us": 1.0, "qbytes": 0}


def _log(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "link.ndjson"
    lines = [{"argv": [], "longlook_link": "0", "schedule": {}, "start_unix_ns": 0, "seed": 0}] + records
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


RECORDS = [
    _record("s2c", "udp 193.167.100.100:443>193.167.0.100:5000", "udp", 443, 5000),
    _record("c2s", "udp 193.167.0.100:5000>193.167.100.100:443", "udp", 5000, 443),
    _record("s2c", "tcp 193.167.100.100:40000>193.167.0.100:5201", "tcp", 40000, 5201),
    _record("s2c", "tcp 193.167.100.100:4433>193.167.0.100:6000", "tcp", 4433, 6000),
]


def test_records_are_selected_by_the_recorded_flow(tmp_path):
    gt = read_log(_log(tmp_path, RECORDS))
    quic = Flow("udp", "server", "193.167.100.100", 443)
    assert [r.flow for r in transfer_records(gt.records, quic)] == [RECORDS[0]["flow"]]
    assert [r.flow for r in transfer_records(gt.records, quic, "c2s")] == [RECORDS[1]["flow"]]
    # A competitor listens on the client's host: its port is the destination of s2c data.
    competitor = Flow("tcp", "client", "193.167.0.100", 5201)
    assert [r.flow for r in transfer_records(gt.records, competitor)] == [RECORDS[2]["flow"]]
    # The protocol counts: kernel TCP on 4433 is not a QUIC flow on 4433.
    assert transfer_records(gt.records, Flow("udp", "server", "193.167.100.100", 4433)) == []


def _observation(tmp_path: Path, flow: Flow | None) -> Observation:
    stack = load("aioquic")
    target = Target(stack, stack.cc[stack.default_cc])
    example = Example("n", "aioquic", target.cc.name, Schedule.constant(0, LinkSettings()), TransferPlan())
    result = TransferResult(stack="aioquic", cc=None, ok=True, reason="", unsupported=False, bytes=1,
                            duration_s=1.0, goodput_bps=8.0, out_dir=str(tmp_path), transfer=flow)
    return Observation(example, target, result, tmp_path)


def test_a_transfer_missing_from_its_ground_truth_is_a_harness_error(tmp_path):
    _log(tmp_path, RECORDS)
    obs = _observation(tmp_path, Flow("udp", "server", "198.19.0.1", 4433))
    with pytest.raises(HarnessError, match=r"transfer's flow was not found in .*link.ndjson: expected udp 198.19.0.1:4433"):
        obs.transfer_records()
    with pytest.raises(HarnessError):
        obs.transfer_share()
    assert len(_observation(tmp_path, Flow("udp", "server", "193.167.100.100", 443)).transfer_records()) == 1


def test_a_run_without_a_recorded_flow_is_a_harness_error(tmp_path):
    _log(tmp_path, RECORDS)
    with pytest.raises(HarnessError, match="recorded no transfer flow"):
        _observation(tmp_path, None).transfer_records()


def test_the_result_round_trips_through_json():
    result = TransferResult(stack="x", cc="cubic", ok=True, reason="", unsupported=False, bytes=1, duration_s=1.0,
                            goodput_bps=8.0, out_dir=".", transfer=Flow("udp", "server", "198.19.0.1", 443),
                            competitors=[Flow("tcp", "client", "198.18.0.1", 5201)])
    assert TransferResult.from_json(json.loads(json.dumps(result.to_json()))) == result


@pytest.mark.parametrize("stack", STACKS)
def test_the_wire_view_finds_the_server_without_the_testbed(stack):
    """A capture read with no addresses (a user's, or a Docker run's) is decoded by
    the server address its first Initial names, as one read with the run's address."""
    d = FIXTURES / stack
    pcap, keys = d / "pcap" / "server.pcap", [d / "keys.log"]
    assert first_initial_destination(pcap) == {"198.19.0.1"}
    inferred, given = read_wire(pcap, keys), read_wire(pcap, keys, server_addrs={"198.19.0.1"})
    assert len(inferred.datagrams) == len(given.datagrams) > 100
    assert [d.direction for d in inferred.datagrams] == [d.direction for d in given.datagrams]
    assert {d.direction for d in inferred.datagrams} == {"c2s", "s2c"}


def test_a_capture_without_quic_names_no_server(tmp_path):
    from scapy.all import IP, UDP, wrpcap

    path = tmp_path / "server.pcap"
    wrpcap(str(path), [IP(src="198.18.0.1", dst="198.19.0.1") / UDP(sport=1, dport=2) / b"\x00" * 20])
    assert first_initial_destination(path) == set()


@pytest.mark.parametrize("env", [{"LONGLOOK_BACKEND": "docker"},
                                 {"LONGLOOK_BACKEND": "local", "LONGLOOK_IMPL_CMD": "tests/endpoints/qir-aioquic.sh"}])
def test_the_kernel_tcp_baseline_always_runs_locally(monkeypatch, env):
    """The baseline a property compares against is the host's kernel: never an image
    (no image of it exists) and never the user's command standing in for the stack."""
    from harness.testbed import docker_backend

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    tcp = docker_backend.load_for_run("tcp")
    assert tcp.name == "tcp" and tcp.command is None and docker_backend.runs_locally(tcp)
    assert docker_backend.provenance(tcp) == {"backend": "local"}
    if env["LONGLOOK_BACKEND"] == "docker":
        assert not docker_backend.runs_locally(docker_backend.load_for_run("aioquic"))
    else:
        assert docker_backend.load_for_run("aioquic").command is not None


def _failed(tmp_path: Path, fates: list[tuple[str, str, str | None]]) -> Observation:
    """A failed transfer whose link log holds `fates` (direction, fate, reason) in order."""
    records = []
    for i, (direction, fate, reason) in enumerate(fates):
        sport, dport = (443, 5000) if direction == "s2c" else (5000, 443)
        r = _record(direction, f"udp {direction}", "udp", sport, dport) | {"idx": i, "fidx": i, "arr_us": 1e6 * i}
        if fate != "delivered":
            r |= {"fate": fate, "reason": reason, "dep_us": None}
        records.append(r)
    _log(tmp_path, records)
    obs = _observation(tmp_path, Flow("udp", "server", "193.167.100.100", 443))
    obs.result.ok, obs.result.reason = False, "client exited with 1: Idle timeout"
    return obs


def test_a_transfer_the_link_cut_off_to_the_end_is_inconclusive_never_a_deviation(tmp_path):
    from harness.run import Inconclusive

    cut = [("s2c", "delivered", None), ("c2s", "delivered", None)] + [("s2c", "dropped", "loss_ge")] * 4
    with pytest.raises(Inconclusive, match=r"dropped all 4 datagrams of the transfer, either way, from 2.00 s"):
        _failed(tmp_path, cut).completed()


@pytest.mark.parametrize("fates", [
    [("s2c", "dropped", "loss_ge")] * 4 + [("c2s", "delivered", None)],  # an ACK got through last
    [("s2c", "delivered", None)] + [("s2c", "dropped", "loss_iid")] * 2,  # two drops: an endpoint's last word
    [("s2c", "delivered", None)] + [("s2c", "dropped", "malformed")] * 4,  # the stack's own doing
    [("s2c", "delivered", None), ("c2s", "delivered", None)],  # a stall: nothing dropped at all
], ids=["news-got-through", "two-drops", "malformed", "stall"])
def test_a_failed_transfer_the_link_did_not_cut_off_is_a_deviation(tmp_path, fates):
    from harness.verdict.deviation import Deviation

    with pytest.raises(Deviation, match="transfer failed"):
        _failed(tmp_path, fates).completed()
