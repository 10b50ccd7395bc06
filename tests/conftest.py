"""Shared fixtures: the emulator binary, root check, stale-run sweep, the lab."""

from __future__ import annotations

import os

import pytest

from harness.testbed.link import LinkBinaryMissing, find_binary
from harness.testbed.netns import sweep_stale
from lab import lab_session  # tests/ is on sys.path (rootdir conftest, prepend import mode)


# CI sets this so that a missing binary or root fails instead of skipping
# the tests that matter most.
REQUIRE_ENV = "LONGLOOK_REQUIRE_NETNS"


def skip_or_fail(reason: str) -> None:
    """Skip with ``reason``, or fail when $LONGLOOK_REQUIRE_NETNS=1."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} (and {REQUIRE_ENV}=1 forbids skipping)")
    pytest.skip(reason)


#: Set by .ci/run when the Docker images were built: Docker's tests may not skip either.
REQUIRE_DOCKER_ENV = "LONGLOOK_REQUIRE_DOCKER"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under $LONGLOOK_REQUIRE_NETNS=1 (CI) no test of the suite may skip, whatever
    skipped it (a fixture, a module-level skipif, a missing build): a skip there is a
    test that checked nothing. Docker's tests are held to it under
    $LONGLOOK_REQUIRE_DOCKER=1 only, which CI sets when the images were built."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail") or os.environ.get(REQUIRE_ENV) != "1":
        return
    docker = item.path.name == "test_docker.py"
    if docker and os.environ.get(REQUIRE_DOCKER_ENV) != "1":
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (f"skipped where CI forbids skipping ({REQUIRE_DOCKER_ENV if docker else REQUIRE_ENV}=1): "
                       f"{reason}")


@pytest.fixture(scope="session")
def link_binary():
    """The built emulator, or skip with the fix."""
    try:
        return find_binary()
    except LinkBinaryMissing as err:
        skip_or_fail(str(err))


@pytest.fixture(scope="session")
def netns_ready(link_binary):
    """Root plus the binary; sweeps what killed earlier runs left, once per session."""
    if os.geteuid() != 0:
        skip_or_fail("needs root to create network namespaces")
    removed = sweep_stale()
    if removed:
        print(f"swept stale namespaces of earlier runs: {removed}")
    return link_binary


@pytest.fixture
def lab(netns_ready, tmp_path):
    """A fresh client/server namespace pair with endpoint helpers, always cleaned up."""
    with lab_session(tmp_path) as bench:
        yield bench


@pytest.fixture(scope="module")
def own_release_cache(tmp_path_factory):
    """A module's own release cache ($LONGLOOK_CACHE, harness/endpoints/releases.py),
    not the user's: the programs its tests start inherit it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LONGLOOK_CACHE", str(tmp_path_factory.mktemp("release-cache")))
        yield
