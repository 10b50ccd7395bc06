"""The Docker backend (docs/docker.md): a real transfer through the emulated link
between two containers, the same fates as the local backend for the same schedule,
clean messages for bad images, and nothing left behind.

Skips, with the fix, where no engine or image is available; CI builds the aioquic
image first and sets LONGLOOK_REQUIRE_DOCKER=1, so there these tests must run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.testbed import containers, netns
from harness import endpoints
from harness.testbed.containers import DockerError
from harness.testbed.docker_backend import CLIENT_IP, SERVER_IP, DockerTestbed
from harness.observe.groundtruth import read_log
from harness.run import Example
from harness.schedule import Flow
from harness.verdict.analysis import transfer_records
from harness.schedule import Action, IidLoss, LinkSettings, Phase, Schedule
from harness.testbed.topology import EndpointOptions, Testbed, TestbedError, TransferPlan

pytestmark = pytest.mark.netns

IMAGE = "longlook/aioquic:latest"
ROOT = Path(__file__).resolve().parent.parent
BASE = os.environ.get("LONGLOOK_BASE_IMAGE", "longlook/base:bookworm")


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("LONGLOOK_REQUIRE_DOCKER") == "1":
        pytest.fail(f"{reason} (and LONGLOOK_REQUIRE_DOCKER=1 forbids skipping)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_ready(netns_ready):
    """A running engine and the aioquic image, or skip naming the make target."""
    try:
        containers.engine_version()
        containers.image_id(IMAGE)
    except DockerError as e:
        _skip_or_fail(f"Docker backend unavailable here: {e}")
    containers.sweep_stale()


def _schedule(seed: int = 3, loss: float = 0.0, actions: tuple = ()) -> Schedule:
    link = LinkSettings(rate_bps=20_000_000, delay_us=10_000, queue_bytes=400_000,
                        loss=IidLoss(loss) if loss else None)
    return Schedule(seed=seed, phases=(Phase(start_us=0, c2s=link, s2c=link),), actions=actions)


def _ours_left() -> list[str]:
    """Containers and namespace names this process still owns."""
    names = containers.docker("ps", "--all", "--filter", f"label={containers.OWNER_LABEL}={os.getpid()}",
                              "--format", "{{.Names}}").stdout.split()
    return names + [n for n in netns.list_ours() if netns.owner_pid(n) == os.getpid()]


def test_transfer_through_the_emulated_link(docker_ready, tmp_path):
    """The aioquic image completes a verified transfer; the link dropped the packet
    the schedule names, and the run directory has the local layout."""
    drop = Action(dir="s2c", index=30, action="drop")
    with DockerTestbed(_schedule(actions=(drop,)), tmp_path, IMAGE) as bed:
        result = bed.transfer(endpoints.load("aioquic"), TransferPlan(sizes=(500_000,)), EndpointOptions(timeout_s=30))
    assert result.ok, result.reason
    assert result.bytes == 500_000
    records = [json.loads(line) for line in (tmp_path / "link.ndjson").read_text().splitlines()]
    packets = [r for r in records if "idx" in r]
    dropped = [r for r in packets if r["fate"] != "delivered"]
    assert [(r["dir"], r["idx"]) for r in dropped] == [("s2c", 30)], dropped
    flows = {r["flow"] for r in packets if r["dir"] == "s2c"}
    assert any(f"{SERVER_IP}:443>{CLIENT_IP}:" in f for f in flows), flows
    # The run names its transfer's flow (issue 24): the verdicts select by it.
    assert result.transfer == Flow("udp", "server", SERVER_IP, 443), result.transfer
    assert len(transfer_records(read_log(tmp_path / "link.ndjson").records, result.transfer)) > 300
    for path in ("pcap/server.pcap", "server/keys.log", "client/keys.log", "server/stdout", "result.json", "docker.json"):
        assert (tmp_path / path).stat().st_size > 0, path
    assert list((tmp_path / "server" / "qlog").iterdir()), "no server qlog"
    # CPU from the containers' cgroups, so saturated() judges Docker runs too.
    for cpu in (result.client_cpu_s, result.server_cpu_s):
        assert cpu is not None and 0 < cpu <= (os.cpu_count() or 1) * result.wall_s + 0.1, result
    assert result.server_run_delay_s is not None
    assert json.loads((tmp_path / "result.json").read_text())["server_cpu_s"] == result.server_cpu_s
    assert _ours_left() == []


def test_same_fates_as_the_local_backend(docker_ready, tmp_path):
    """One schedule, one transfer per backend: the fate of every packet index both
    runs saw is the same (the loss draws follow the seed and the index only)."""
    schedule, plan = _schedule(seed=11, loss=0.03), TransferPlan(sizes=(400_000,))
    fates = {}
    for name, bed in (("local", Testbed(schedule, tmp_path / "local")),
                      ("docker", DockerTestbed(schedule, tmp_path / "docker", IMAGE))):
        with bed:
            result = bed.transfer(endpoints.load("aioquic"), plan, EndpointOptions(timeout_s=30))
        assert result.ok, f"{name}: {result.reason}"
        lines = (tmp_path / name / "link.ndjson").read_text().splitlines()
        fates[name] = {(r["dir"], r["idx"]): r["fate"] for r in map(json.loads, lines) if "idx" in r}
    common = fates["local"].keys() & fates["docker"].keys()
    assert len(common) > 300
    lost = [k for k in common if fates["local"][k] != "delivered"]
    assert lost, "the schedule lost nothing: the comparison would prove little"
    differ = sorted(k for k in common if fates["local"][k] != fates["docker"][k])
    assert differ == [], f"fates differ at {differ[:10]}"


def test_missing_image_is_named(docker_ready, tmp_path):
    with pytest.raises(TestbedError, match=r"longlook/no-such-stack:none not found.*make docker-images"):
        with DockerTestbed(_schedule(), tmp_path, "longlook/no-such-stack:none"):
            pass


def test_image_that_exits_at_once_fails_within_seconds(docker_ready, tmp_path):
    """The bare base image runs bash without input and exits: a failed result naming
    the image, quickly, with nothing left behind."""
    started = time.monotonic()
    with DockerTestbed(_schedule(), tmp_path, BASE) as bed:
        result = bed.transfer(endpoints.load("aioquic"), TransferPlan(sizes=(1000,)), EndpointOptions(timeout_s=10))
    assert not result.ok and BASE in result.reason, result.reason
    assert time.monotonic() - started < 15
    assert _ours_left() == []


def test_container_cpu_is_read_from_its_cgroup(docker_ready):
    """A busy container's cgroup counts at least its process's own CPU time, and
    little more (the runtime's start-up)."""
    name = f"ll-test-cpu-{os.getpid()}"
    containers.docker("run", "--detach", "--network", "none", "--name", name,
                      "--label", f"{containers.OWNER_LABEL}={os.getpid()}", BASE, "sh", "-c", "while :; do :; done")
    try:
        pid = int(containers.docker("inspect", "--format", "{{.State.Pid}}", name).stdout)
        group = containers.CpuCgroup.of(pid)
        assert group is not None, f"no CPU cgroup found for {name} (pid {pid})"
        time.sleep(0.5)
        ticks = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13]  # utime, stime
        own = sum(map(int, ticks)) / os.sysconf("SC_CLK_TCK")
        total = group.cpu_s()
        assert total is not None and total >= own > 0.05, (total, own)
        assert total - own < 0.25, (total, own)
        assert group.run_delay_s() is not None
    finally:
        containers.docker("rm", "--force", name, check=False)
    assert group.cpu_s() is None  # gone with the container: why wait() samples


def test_no_ephemeral_port_can_take_the_sim_port(docker_ready):
    """An endpoint's wait-for-sim probe connects to its own SIM_PORT from ephemeral
    ports; one that drew SIM_PORT self-connected and kept the listener from binding
    (EADDRINUSE in a CI run). The port is reserved in every container we start, and
    the listener binds while the probe keeps knocking."""
    c = containers.run_container(IMAGE, f"ll-test-simport-{os.getpid()}", "client", {"ROLE": "client"}, {}, {})
    try:
        reserved = containers.docker("exec", c.id, "cat", "/proc/sys/net/ipv4/ip_local_reserved_ports").stdout
        assert reserved.strip() == str(containers.SIM_PORT)
        c.open_sim()
        assert c.alive()
    finally:
        c.remove()
    assert _ours_left() == []


def test_sweep_removes_containers_of_dead_owners(docker_ready):
    """A container labelled with an owner that no longer runs (a killed run) goes;
    one whose owner is alive stays."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    names = {}
    for owner in (dead.pid, os.getpid()):
        name = f"ll-test-sweep-{owner}"
        containers.docker("run", "--detach", "--network", "none", "--name", name,
                          "--label", f"{containers.OWNER_LABEL}={owner}", BASE, "sleep", "60")
        names[owner] = name
    try:
        removed = containers.sweep_stale()
        assert names[dead.pid] in removed
        assert names[os.getpid()] not in removed
        left = containers.docker("ps", "--all", "--format", "{{.Names}}").stdout.split()
        assert names[dead.pid] not in left and names[os.getpid()] in left
    finally:
        for name in names.values():
            containers.docker("rm", "--force", name, check=False)


def _longlook(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_cli_transfer_through_docker(docker_ready, tmp_path):
    done = _longlook("transfer", "--backend", "docker", "--impl", "aioquic", "--bytes", "300KB",
                     "--rate", "20mbit", "--rtt", "20ms", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stdout + done.stderr
    meta = json.loads((tmp_path / "run" / "docker.json").read_text())
    assert meta["image"] == IMAGE
    assert json.loads((tmp_path / "run" / "result.json").read_text())["server_cpu_s"] is not None
    assert _ours_left() == []


def _one_line_error(tmp_path, *args: str) -> str:
    done = _longlook("transfer", "--impl", "aioquic", "--rate", "10mbit", "--rtt", "10ms",
                     "--out", str(tmp_path / "r"), *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


@pytest.mark.parametrize("args, needle", [
    (["--image", "x:y"], "--image needs --backend docker"),
    (["--backend", "docker", "--impl-cmd", "true"], "not with --backend docker"),
])
def test_cli_backend_errors_are_one_line(args, needle, tmp_path):
    assert needle in _one_line_error(tmp_path, *args)


def test_cli_missing_image_is_one_line(docker_ready, tmp_path):
    # Needs an engine: without one the (also one-line) error is that no engine answers.
    assert "image longlook/no-such:none not found" in _one_line_error(
        tmp_path, "--backend", "docker", "--image", "longlook/no-such:none")


def _saved_example(directory: Path, run: dict) -> Path:
    """An example directory as a property run through `run` leaves it (a liveness example)."""
    example = Example("properties/test_liveness.py::test_transfer_completes_under_loss_and_reordering[aioquic-newreno]",
                      "aioquic", "newreno", _schedule(), TransferPlan(sizes=(100_000,)), 20.0)
    directory.mkdir(parents=True)
    (directory / "example.json").write_text(json.dumps(example.to_json() | {"run": run}))
    return directory


def test_replay_goes_through_the_image_that_ran(docker_ready, tmp_path):
    """The example remembers its backend and image: the replay asks the engine for
    that image, here one that does not exist, so the failure names it."""
    example = _saved_example(tmp_path / "ex", {"backend": "docker", "image": "longlook/no-such:none"})
    done = _longlook("replay", str(example))
    out = done.stdout + done.stderr
    assert "--backend docker --image longlook/no-such:none" in out, out[-2000:]
    assert done.returncode != 0 and "image longlook/no-such:none not found" in out, out[-2000:]
    assert _ours_left() == []


def test_replay_prefers_the_build_that_failed(docker_ready, tmp_path):
    """An image rebuilt since the failure: the replay runs the recorded build while the engine still has it."""
    from harness.cli import _replay_backend

    old = containers.image_id(BASE)  # stands in for an earlier build of the image
    (tmp_path / "docker.json").write_text(json.dumps({"image": IMAGE, "image_id": old}))
    assert _replay_backend({"backend": "docker", "image": IMAGE}, tmp_path) == ["--backend", "docker", "--image", old]
    (tmp_path / "docker.json").write_text(json.dumps({"image": IMAGE, "image_id": "sha256:" + "0" * 64}))
    assert _replay_backend({"backend": "docker", "image": IMAGE}, tmp_path) == ["--backend", "docker", "--image", IMAGE]
    assert _replay_backend({"backend": "local", "command": ["/bin/ep", "a b"]}, tmp_path) == ["--impl-cmd", "/bin/ep 'a b'"]
    assert _replay_backend({"backend": "local"}, tmp_path) == []


@pytest.mark.parametrize("stack", ["aioquic", "picoquic", "quic-go", "quiche", "quinn", "tquic", "s2n-quic"])
def test_each_of_our_images_transfers(docker_ready, stack, tmp_path):
    """Every image docker/Dockerfile makes runs its endpoint (skips one not built here)."""
    image = f"longlook/{stack}:latest"
    try:
        containers.image_id(image)
    except DockerError as e:
        pytest.skip(f"{e} (DOCKER_STACKS={stack} make docker-images)")
    with DockerTestbed(_schedule(loss=0.01), tmp_path, image) as bed:
        result = bed.transfer(endpoints.load(stack), TransferPlan(sizes=(300_000,)), EndpointOptions(timeout_s=30))
    assert result.ok, result.reason
    assert list((tmp_path / "server" / "qlog").iterdir()), "no server qlog"


def test_a_release_runs_from_its_own_image(docker_ready, tmp_path):
    """`--backend docker --impl aioquic@1.6.1`: the release's image (longlook/aioquic:1.6.1),
    staged from the release cache by scripts/docker-images.sh STACK@VERSION; without the
    image, the error names the command that builds it."""
    release = "aioquic@1.6.1"
    image = "longlook/aioquic:1.6.1"
    containers.docker("image", "rm", "--force", image, check=False)
    missing = _longlook("transfer", "--backend", "docker", "--impl", release, "--rate", "10mbit", "--rtt", "10ms",
                        "--out", str(tmp_path / "none"))
    assert missing.returncode == 2 and f"scripts/docker-images.sh {release}" in missing.stderr, missing.stderr
    built = subprocess.run([str(ROOT / "scripts" / "docker-images.sh"), release], capture_output=True, text=True,
                           timeout=600, check=False)
    assert built.returncode == 0, built.stderr
    try:
        done = _longlook("transfer", "--backend", "docker", "--impl", release, "--bytes", "300KB",
                         "--rate", "20mbit", "--rtt", "20ms", "--out", str(tmp_path / "run"))
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.startswith(f"{release} newreno: 300000 bytes"), done.stdout
        assert json.loads((tmp_path / "run" / "docker.json").read_text())["image"] == image
        for side in ("client", "server"):
            record = json.loads((tmp_path / "run" / side / "app.ndjson").read_text().splitlines()[0])
            assert record["version"] == "1.6.1", (side, record)
    finally:
        containers.docker("image", "rm", "--force", image, check=False)
    assert _ours_left() == []
