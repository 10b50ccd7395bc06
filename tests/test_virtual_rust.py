"""What the Rust virtual-time binaries (quinn-virtual, quiche-virtual) share: the
same refusals and the same failure in virtual time. Each stack's own behaviour is
in tests/test_virtual_quinn.py and tests/test_virtual_quiche.py."""

from __future__ import annotations

import pytest

from harness import endpoints
from harness.schedule import LinkSettings, Schedule
from harness.testbed.topology import EndpointOptions, TransferPlan
from harness.virtual import RealTimeOnly, rust, transfer, transfer_with_stats
from virtual_runs import files, lossy


def _built(stack: str, *more):
    return pytest.param(stack, *more, id=stack, marks=pytest.mark.skipif(
        not rust.built(stack), reason=f"{rust.BINARIES[stack]} not built: run `make setup`"))


@pytest.mark.parametrize("stack, cc", [_built("quinn", "cubic"), _built("quiche", "bbr")])
def test_reruns_are_byte_identical_and_the_seed_reaches_everything(stack, cc, tmp_path):
    plan, opts = TransferPlan(sizes=(200_000,)), EndpointOptions(cc=cc)
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        assert transfer(lossy(seed), tmp_path / name, endpoints.load(stack), plan, opts).ok
    a, b, c = (files(tmp_path / n) for n in "abc")
    assert a == b
    # Another seed: other link fates and other entropy (TLS secrets, connection IDs).
    assert a["link.ndjson"] != c["link.ndjson"]
    assert a["server/keys.log"] != c["server/keys.log"]
    assert a["pcap/server.pcap"] != c["pcap/server.pcap"]


@pytest.mark.parametrize("stack", [_built("quinn"), _built("quiche")])
def test_competing_flows_each_get_a_client_and_share_the_link(stack, tmp_path):
    """quic_flows > 1: client k (port 40000 + k - 1, directory client-k/) fetches
    the objects over its own connection, as the real testbed's extra clients."""
    from harness.observe.groundtruth import read_log
    from harness.observe.join import flow_shares

    plan = TransferPlan(sizes=(400_000,), quic_flows=2)
    schedule = Schedule.constant(4, LinkSettings(rate_bps=10_000_000, delay_us=10_000, queue_bytes=50_000))
    result, stats = transfer_with_stats(schedule, tmp_path, endpoints.load(stack), plan, EndpointOptions())
    assert result.ok, result.reason
    assert stats["flows"] == 2
    assert (tmp_path / "client-2" / "downloads" / "object-0-400000.bin").stat().st_size == 400_000
    assert len(list((tmp_path / "server" / "qlog").iterdir())) == 2
    shares = flow_shares(read_log(tmp_path / "link.ndjson"))
    ports = sorted(int(f.flow.rsplit(":", 1)[1]) for f in shares if "udp" in f.flow)
    assert ports == [40000, 40001], [f.flow for f in shares]


def test_aioquic_virtual_backend_refuses_several_flows(tmp_path):
    """aioquic's in-process backend runs one connection and says so."""
    plan = TransferPlan(sizes=(400_000,), quic_flows=2)
    with pytest.raises(RealTimeOnly, match="runs one for aioquic"):
        transfer(lossy(4), tmp_path, endpoints.load("aioquic"), plan, EndpointOptions())


@pytest.mark.parametrize("stack", [_built("quinn"), _built("quiche")])
def test_options_the_stack_cannot_honour_are_unsupported_not_errors(stack, tmp_path):
    result = transfer(lossy(1), tmp_path, endpoints.load(stack), TransferPlan(sizes=(1000,)),
                      EndpointOptions(cc="vegas"))
    assert result.unsupported and not result.ok
    assert f"{stack} has no cc" in result.reason and "newreno" in result.reason


@pytest.mark.parametrize("stack, gave_up", [_built("quinn", "connection lost"), _built("quiche", "idle timeout")])
def test_a_timeout_in_virtual_time_is_a_failed_transfer(stack, gave_up, tmp_path):
    """Into a blackhole: the stack gives up (`gave_up`) or the virtual timeout ends it."""
    blackhole = Schedule.constant(1, LinkSettings(blackhole=True))
    result = transfer(blackhole, tmp_path, endpoints.load(stack), TransferPlan(sizes=(1000,)),
                      EndpointOptions(timeout_s=5))
    assert not result.ok and not result.unsupported
    assert gave_up in result.reason or "LL_TIMEOUT_S=5 (virtual)" in result.reason, result.reason
