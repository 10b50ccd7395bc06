"""What the Rust virtual-time binaries (quinn-virtual, quiche-virtual) share: the
same refusals and the same failure in virtual time. Each stack's own behaviour is
in tests/test_virtual_quinn.py and tests/test_virtual_quiche.py."""

from __future__ import annotations

import pytest

from harness import endpoints
from harness.schedule import LinkSettings, Schedule
from harness.topology import EndpointOptions, TransferPlan
from harness.virtual import rust, transfer
from virtual_runs import lossy


def _built(stack: str, *more):
    return pytest.param(stack, *more, id=stack, marks=pytest.mark.skipif(
        not rust.built(stack), reason=f"{rust.BINARIES[stack]} not built: run `make setup`"))


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
