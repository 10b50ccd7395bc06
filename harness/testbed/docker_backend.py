"""The Docker backend: the endpoints run as QUIC Interop Runner–style images, one
container per role, joined by the same emulated link and observed the same way.

    with DockerTestbed(schedule, out_dir, "longlook/aioquic:latest") as bed:
        result = bed.transfer(stack, TransferPlan(sizes=(5_000_000,)))

Each container starts with ``--network none`` and waits for `sim:57832` (the
interop runner's signal that the network is up). The harness names its network
namespace, the emulator opens a TUN called eth0 inside it, the harness gives it the
interop runner's address (client 193.167.0.100, server 193.167.100.100) and a route
to the peer's /24, and only then answers on 57832. These addresses exist only inside
the containers' namespaces, which have no default route. The run directory has the
local backend's layout (docs/testbed.md) plus docker.json.

Which backend and image a run uses comes from $LONGLOOK_BACKEND and $LONGLOOK_IMAGE
(the pytest plugin's --backend and --image set them); :func:`open_testbed` is the one
place that reads them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path

from harness.testbed import commands, containers, netns
from harness import endpoints
from harness.testbed.certs import write_certs
from harness.testbed.containers import Container, DockerError
from harness.testbed.contract import unhonoured
from harness.endpoints import CongestionControl, Stack, StackError
from harness.testbed.link import Link, LinkOptions
from harness.schedule import Schedule
from harness.testbed.topology import (
    EndpointOptions, Testbed, TestbedError, TransferPlan, TransferResult, contract_env, require_root,
    write_objects,
)

STACKS_FILE = Path(__file__).resolve().parents[2] / "docker" / "stacks.json"
BACKEND_ENV, IMAGE_ENV = "LONGLOOK_BACKEND", "LONGLOOK_IMAGE"
BACKENDS = ("local", "docker")
#: The interop runner's world (its docker-compose.yml), recreated inside the containers.
CLIENT_ADDR, SERVER_ADDR = "193.167.0.100/24", "193.167.100.100/24"
CLIENT_IP, SERVER_IP = CLIENT_ADDR.split("/")[0], SERVER_ADDR.split("/")[0]
SERVER_PORT = 443
#: The emulator's device in each container: interop-runner setup scripts configure eth0.
DEVICE = "eth0"
SERVER_LISTEN_TIMEOUT_S = 10.0


def backend() -> str:
    name = os.environ.get(BACKEND_ENV, "local") or "local"
    if name not in BACKENDS:
        raise TestbedError(f"{BACKEND_ENV}={name!r}: choose one of {', '.join(BACKENDS)}")
    return name


def _stacks_file() -> dict:
    try:
        entries = json.loads(STACKS_FILE.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise StackError(f"{STACKS_FILE}: unreadable ({e})") from None
    return {k: v for k, v in entries.items() if not k.startswith("_")}


def stack_names() -> list[str]:
    return sorted(_stacks_file())


def load_stack(name: str) -> Stack:
    """The stack `name` of docker/stacks.json. One of ours is the very Stack of
    harness/endpoints (same CC list, dialect and target ids, so recorded findings
    apply); another is described by its entry. An entry with "command" runs that
    program in the namespaces instead of an image (harness/testbed/commands.py)."""
    entries = _stacks_file()
    if name not in entries:
        raise StackError(f"{name!r} is not in {STACKS_FILE}; known: {', '.join(sorted(entries))}")
    entry = entries[name]
    try:
        if entry.get("endpoint"):
            stack = endpoints.load(entry["endpoint"])
        else:
            ccs = {k: CongestionControl(k, v["family"], v.get("beta")) for k, v in entry["cc"].items()}
            stack = Stack(name=name, version=str(entry.get("version", "image")), directory=STACKS_FILE.parent,
                          cc=ccs, default_cc=entry["default_cc"], qlog_format=entry.get("qlog_format"))
        if entry.get("command"):
            # Relative to the checkout, so an entry means the same from any working directory.
            command = commands.parse(entry["command"], f"{STACKS_FILE} entry {name!r}", STACKS_FILE.parent.parent)
            stack = dataclasses.replace(stack, command=command)
        return stack
    except (KeyError, TypeError, AttributeError) as e:
        raise StackError(f"{STACKS_FILE}: entry {name!r} malformed ({e!r}); see docs/docker.md") from None


#: The kernel TCP baseline (and competitor): the host's kernel, never an image or a
#: user's command, whatever the backend of the stack under test.
KERNEL_BASELINE = "tcp"


def runs_locally(stack: Stack) -> bool:
    """Whether `stack` runs in the namespaces whatever the backend in force."""
    return stack.name == KERNEL_BASELINE and stack.command is None


def load_for_run(name: str) -> Stack:
    """The stack `name` as the backend in force runs it: ours or a command entry of
    the stacks file locally, any entry under Docker; with $LONGLOOK_IMPL_CMD, run
    through that command. The kernel TCP baseline is always ours, run locally.
    StackError names the fix."""
    if name == KERNEL_BASELINE:
        return endpoints.load(name)
    if "@" in name:
        # A release other than the pinned one (harness.endpoints.releases) runs from its
        # cache on this host, or under Docker from its own image (longlook/<stack>:<version>,
        # scripts/docker-images.sh STACK@VERSION, which stages it from that cache).
        if os.environ.get(commands.IMPL_CMD_ENV):
            raise StackError(f"{name}: a release from the cache runs without --impl-cmd (a command is its own build)")
        return endpoints.load(name)
    if backend() == "docker":
        stack = load_stack(name)
    elif name in endpoints.STACKS:
        stack = endpoints.load(name)
    elif name not in _stacks_file():
        local = sorted(k for k, v in _stacks_file().items() if v.get("command"))
        raise StackError(f"unknown stack {name!r}; known stacks: {', '.join(endpoints.STACKS)}"
                         + (f", and local commands of {STACKS_FILE}: {', '.join(local)}" if local else "")
                         + f" (images of {STACKS_FILE.name} need --backend docker)")
    else:
        stack = load_stack(name)
        if stack.command is None:
            raise StackError(f"{name!r} runs as an image in {STACKS_FILE}: add --backend docker "
                             f"(or give it a \"command\" to run it without Docker)")
    command = os.environ.get(commands.IMPL_CMD_ENV)
    if command:
        if backend() == "docker":
            raise StackError("--impl-cmd runs a local program in the namespaces; it has no --backend docker "
                             "(give the image with --image instead)")
        stack = commands.with_command(stack, command)
    return stack


def image_for(stack: str | Stack) -> str:
    """$LONGLOOK_IMAGE if set, else the stack's image from docker/stacks.json; a
    release's is that image tagged with its version (longlook/aioquic:1.5.0)."""
    override = os.environ.get(IMAGE_ENV)
    if override:
        return override
    name = stack if isinstance(stack, str) else stack.name
    image = _stacks_file().get(name, {}).get("image")
    if not image:
        raise TestbedError(f"no image for {name!r} in {STACKS_FILE}: give one with --image NAME")
    if not isinstance(stack, str) and stack.release_dir is not None:
        return f"{image.rpartition(':')[0] or image}:{stack.version}"
    return image


def open_testbed(schedule: Schedule, out_dir: Path, stack: Stack, pcap: bool = True) -> Testbed:
    """The testbed of the backend in force for one run of `stack`."""
    if backend() == "docker" and not runs_locally(stack):
        if stack.command:
            raise TestbedError(f"{stack.name} is a command ({commands.describe(stack)}): it runs with --backend local")
        return DockerTestbed(schedule, out_dir, image_for(stack), pcap=pcap)
    return Testbed(schedule, out_dir, pcap=pcap)


def provenance(stack: Stack) -> dict:
    """What ran `stack` in this run, for example.json: a replay runs it the same way."""
    record: dict = {"backend": "local" if runs_locally(stack) else backend()}
    if record["backend"] == "docker":
        record["image"] = image_for(stack)
    if stack.command:
        record["command"] = list(stack.command)
    return record


class DockerTestbed(Testbed):
    """Client and server containers of `image` and the link between them; one
    transfer per testbed (the containers are the endpoints' processes)."""

    def __init__(self, schedule: Schedule, out_dir: str | Path, image: str, *, pcap: bool = True,
                 fifo: bool = True, params: dict[str, str] | None = None):
        super().__init__(schedule, out_dir, pcap=pcap, fifo=fifo)
        self.image = image
        #: SERVER_PARAMS / CLIENT_PARAMS of the interop runner, passed through.
        self.params = params or {}
        self.containers: dict[str, Container] = {}
        self.client_ip, self.server_ip = CLIENT_IP, SERVER_IP
        self.timings: dict[str, float] = {}

    def __enter__(self) -> DockerTestbed:
        require_root()
        self.out.mkdir(parents=True, exist_ok=True)
        try:
            self.engine = containers.engine_version()
            containers.sweep_stale()
            netns.sweep_stale()
            self.image_id = containers.image_id(self.image)
        except DockerError as e:
            raise TestbedError(str(e)) from None
        self._stack.callback(self._remove_containers)
        return self

    def transfer(self, stack: Stack, plan: TransferPlan, opts: EndpointOptions = EndpointOptions(),
                 peer: Stack | None = None) -> TransferResult:
        if peer is not None and peer.name != stack.name:
            raise TestbedError(f"a mixed pair ({stack.name} sending, {peer.name} receiving) runs on the local "
                               "backend only: drop --backend docker")
        if plan.direction != "download":
            raise TestbedError("an upload runs on the local backend only: drop --backend docker")
        if self.containers:
            raise TestbedError("a DockerTestbed runs one transfer; open another for the next")
        digests = write_objects(self.out / "www", plan.sizes, plan.seed)
        write_certs(self.out / "certs", padding=plan.cert_padding)
        for role in ("client", "server"):
            (self.out / role / "qlog").mkdir(parents=True, exist_ok=True)
        (self.out / "client" / "downloads").mkdir(exist_ok=True)
        self._flows = self.flows(stack, plan, SERVER_PORT)
        refused = unhonoured(stack, opts)
        if refused:
            return self._result(stack, opts, _Exited(127), None, digests, 0.0, refused)
        if plan.quic_flows > 1:
            # One client container per testbed: competing QUIC clients are not run
            # here, and a run with fewer flows than its plan judges nothing.
            # The server's stand-in exits 127: the contract's "unsupported".
            return self._result(stack, opts, _Exited(127), None, digests, 0.0,
                                f"the Docker backend runs one client container; this plan has {plan.quic_flows} "
                                f"QUIC clients (run it with --backend local)")
        t0 = time.monotonic()
        try:
            self._start_containers(plan, opts, list(digests))
            self._wire_link()
        except DockerError as e:
            self._save_logs()
            return self._result(stack, opts, _Exited(None), None, digests, 0.0, str(e))
        self.timings["setup_s"] = time.monotonic() - t0
        server, client = self.containers["server"], self.containers["client"]
        server.open_sim()
        failure = self._wait_listening(server)
        if failure is None and plan.tcp_flows:
            failure = self._start_competitors(plan, opts.timeout_s)
        if failure is not None:
            server.stop()
            self._save_logs()
            return self._result(stack, opts, server, None, digests, 0.0, failure)
        started = time.monotonic()
        client.open_sim()
        rc = client.wait(opts.timeout_s + 5.0)
        elapsed = time.monotonic() - started
        # The server's cgroup goes when it exits: read it while it still runs.
        server.sample_cpu()
        run_delay = server.cgroup.run_delay_s() if server.cgroup else None
        server.stop()
        self._stop_competitors()
        self._save_logs()
        if rc is None:
            client.stop(grace_s=1.0)
            return self._result(stack, opts, server, client, digests, elapsed,
                                f"client ({self.image}) did not finish within {opts.timeout_s + 5.0:.0f} s")
        result = self._result(stack, opts, server, client, digests, elapsed, None,
                              (client.cpu_used_s(), server.cpu_used_s()))
        result.server_run_delay_s = run_delay
        (self.out / "result.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")
        return result

    def _start_containers(self, plan: TransferPlan, opts: EndpointOptions, names: list[str]) -> None:
        common = contract_env(opts, plan) | {"SSLKEYLOGFILE": "/logs/keys.log", "LL_APPLOG": "/logs/app.ndjson"}
        if opts.qlog:
            common["QLOGDIR"] = "/logs/qlog"
        ro = {self.out / "www": "/www:ro", self.out / "certs": "/certs:ro"}
        requests = " ".join(f"https://server4:{SERVER_PORT}/{n}" for n in names)
        roles = {
            "server": ({"SERVER_PARAMS": self.params.get("server", "")}, ro | {self.out / "server": "/logs"},
                       {"sim": SERVER_IP, "client": CLIENT_IP, "client4": CLIENT_IP}),
            "client": ({"REQUESTS": requests, "CLIENT_PARAMS": self.params.get("client", "")},
                       {self.out / "client": "/logs", self.out / "client" / "downloads": "/downloads"},
                       {"sim": CLIENT_IP, "server": SERVER_IP, "server4": SERVER_IP}),
        }
        # `sim` is each container's own address: the harness answers there, and it is
        # no local gateway, which /setup.sh's `route add … gw <x>.2` would reject.
        tag = netns.new_name()
        for role, (env, mounts, hosts) in roles.items():
            env = common | env | {"ROLE": role}
            self.containers[role] = containers.run_container(self.image, f"{tag}-{role}", role, env, mounts, hosts)

    def _wire_link(self) -> None:
        for c in self.containers.values():
            c.attach_netns()
            try:
                netns.apply_sysctls(c.ns, netns.NAMESPACE_SYSCTLS)
            except netns.NetnsError as e:
                raise DockerError(f"{c.role} container of {self.image}: {e}") from None
        self.client_ns, self.server_ns = self.containers["client"].ns, self.containers["server"].ns
        options = LinkOptions(pcap_dir=self.out / "pcap" if self.pcap else None, fifo=self.fifo,
                              client_dev=DEVICE, server_dev=DEVICE, client_addr=CLIENT_ADDR, server_addr=SERVER_ADDR)
        self.link = self._stack.enter_context(Link(self.schedule, self.client_ns, self.server_ns, self.out, options))

    def _wait_listening(self, server: Container) -> str | None:
        deadline = time.monotonic() + SERVER_LISTEN_TIMEOUT_S
        while time.monotonic() < deadline:
            if server.udp_bound(SERVER_PORT):
                return None
            if not server.alive():
                return (f"server container ({self.image}) exited with {server.wait(0)} before listening on "
                        f"UDP {SERVER_PORT}: see {self.out / 'server' / 'stderr'}")
            time.sleep(0.02)
        return (f"server container ({self.image}) not listening on UDP {SERVER_PORT} within "
                f"{SERVER_LISTEN_TIMEOUT_S:.0f} s (the interop runner's port): wrong port or stuck")

    def _save_logs(self) -> None:
        for role, c in self.containers.items():
            c.save_logs(self.out / role)
        self._save_meta()

    def _save_meta(self) -> None:
        meta = {"engine": getattr(self, "engine", None), "image": self.image, "image_id": getattr(self, "image_id", None),
                "containers": {r: c.name for r, c in self.containers.items()}, "timings": self.timings}
        (self.out / "docker.json").write_text(json.dumps(meta, indent=2) + "\n")

    def _remove_containers(self) -> None:
        # After Ctrl-C or an error mid-transfer the logs are all that explains the run.
        if self.containers and not (self.out / "docker.json").exists():
            with contextlib.suppress(Exception):
                self._save_logs()
        t0 = time.monotonic()
        for c in self.containers.values():
            c.remove()
        if self.containers:
            self.timings["teardown_s"] = time.monotonic() - t0
            self._save_meta()


class _Exited:
    """Stands in for a server that never started, for Testbed._result."""

    def __init__(self, returncode: int | None):
        self.returncode = returncode
