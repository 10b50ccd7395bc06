"""The testbed: a client and a server host (network namespaces), the emulated link
between them, endpoints started inside, and a cleanup that always runs.

    with Testbed(schedule, out_dir) as bed:
        result = bed.transfer(load("aioquic"), TransferPlan(sizes=(5_000_000,)))

Everything a run produces lands under `out_dir` (layout in docs/testbed.md). Cleanup
covers success, exceptions and Ctrl-C; when the runner is SIGKILLed, what it started
dies with it (harness.testbed.lifeline), and an earlier run's leftovers are swept on
entry (namespaces carry their owner's pid, see harness.testbed.netns).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

from harness.testbed import lifeline, netns, rootless
from harness.testbed.competition import RIVAL_PORT, TCP_COMPETITOR_PORT, TCP_WARMUP_S, Competition  # noqa: F401
from harness.testbed.procs import children_cpu_s, group_run_delay_s, role_name, stop_group, tail, wait_ready
from harness.testbed.certs import write_certs
from harness.testbed.contract import (  # noqa: F401  (the testbed's public names, as before)
    FLOW_WINDOW,
    SATURATED_CPU,
    STARVED_RUN_DELAY,
    EndpointOptions,
    TransferResult,
    app_duration_s,
    contract_env,
    peer_env,
    sha256_of,
    unhonoured,
    unhonoured_by_peer,
    write_objects,
)
from harness.endpoints import Stack
from harness.testbed.link import REPO_ROOT, Link, LinkOptions
from harness.schedule import Flow, Schedule, TransferPlan

#: The interop runner's server port, for endpoints given as commands (harness/testbed/commands.py).
QIR_PORT = 443

#: Where the server listens, inside its namespace (docs/endpoints.md).
SERVER_IP = netns.SERVER_ADDR.split("/")[0]
CLIENT_IP = netns.CLIENT_ADDR.split("/")[0]
SERVER_PORT = 4433


class TestbedError(RuntimeError):
    """The testbed could not be set up; the message names the problem and the fix."""

    __test__ = False  # not a pytest test class


def require_namespaces() -> None:
    """Network namespaces and TUN devices need root, or a user namespace of the run's
    own (harness.testbed.rootless); entered here when not yet, or said in one line
    with the fix."""
    try:
        rootless.enter()
    except rootless.RootlessError as e:
        raise TestbedError(f"longlook needs network namespaces and TUN devices: {e}") from None


def require_root() -> None:
    """The Docker backend needs the host's root: its engine, and ``ip netns attach`` of
    a container's namespace, live outside any user namespace of ours."""
    if os.geteuid() != 0 or rootless.entered():
        raise TestbedError("the Docker backend needs root (its engine and the containers' namespaces are "
                           "the host's); run it with sudo, or use the local backend, which runs without root")


class Testbed(Competition):
    """Two hosts and the link; `transfer` runs one client/server exchange."""

    __test__ = False

    def __init__(self, schedule: Schedule, out_dir: str | Path, *, pcap: bool = True, fifo: bool = True):
        self.schedule = schedule
        # Absolute: endpoints run with their own working directories.
        self.out = Path(out_dir).resolve()
        self.pcap = pcap
        self.fifo = fifo
        self.client_ns = ""
        self.server_ns = ""
        self.link: Link | None = None
        self._stack = contextlib.ExitStack()
        self._procs: list[subprocess.Popen] = []
        self._competitors: list[subprocess.Popen] = []
        self._rival_server: subprocess.Popen | None = None
        #: The hosts' addresses on the link (the Docker backend uses the interop runner's).
        self.client_ip = CLIENT_IP
        self.server_ip = SERVER_IP
        #: The flows of the transfer in progress (set by transfer(), read by _result()).
        self._flows: tuple[Flow | None, list[Flow]] = (None, [])

    def __enter__(self) -> Testbed:
        require_namespaces()
        self.out.mkdir(parents=True, exist_ok=True)
        netns.sweep_stale()
        try:
            self.client_ns, self.server_ns = self._stack.enter_context(netns.namespace_pair())
            self._stack.callback(self._stop_endpoints)
            options = LinkOptions(pcap_dir=self.out / "pcap" if self.pcap else None, fifo=self.fifo)
            self.link = self._stack.enter_context(
                Link(self.schedule, self.client_ns, self.server_ns, self.out, options)
            )
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    # -- endpoints ---------------------------------------------------------------

    def start_endpoint(self, stack: Stack, role: str, env: dict[str, str], workdir: Path,
                       side: str | None = None) -> subprocess.Popen:
        """Starts `stack`'s endpoint as `role` in the namespace of link side `side`
        (default: the role's own), in its own process group (so the whole tree can
        be stopped), stdout/stderr into `workdir`; it dies with this process
        (harness.testbed.lifeline)."""
        ns = self.client_ns if (side or role) == "client" else self.server_ns
        full_env = dict(os.environ)
        # Python endpoints run under the harness's interpreter with the caller's
        # PYTHONPATH plus the checkout and the working directory, so a controller
        # given by import path is importable inside the namespace. Not all of
        # sys.path: picoquic's endpoint runs another Python whose stdlib must win.
        full_env["LL_PYTHON"] = sys.executable
        # A release other than the pinned one comes first (harness.endpoints.releases).
        release = [str(stack.release_dir)] if stack.release_dir else []
        paths = [*release, os.environ.get("PYTHONPATH", ""), str(REPO_ROOT), os.getcwd()]
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        # Only `env` says where qlog goes; an inherited QLOGDIR would defeat qlog=False.
        full_env.pop("QLOGDIR", None)
        full_env.update(env, ROLE=role)
        out = (workdir / "stdout").open("wb")
        err = (workdir / "stderr").open("wb")
        with out, err:
            proc = lifeline.popen(
                ["ip", "netns", "exec", ns, *stack.argv],
                env=full_env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                cwd=workdir, start_new_session=True,
            )
        self._procs.append(proc)
        return proc

    def _stop_endpoints(self) -> None:
        for proc in self._procs:
            stop_group(proc)
        self._procs.clear()

    def transfer(self, stack: Stack, plan: TransferPlan, opts: EndpointOptions = EndpointOptions(),
                 peer: Stack | None = None) -> TransferResult:
        """One verified transfer of every object of `plan`, sent by `stack`'s endpoint
        (the server of a download, the client of an upload) to `peer`'s (default the
        same stack: a mixed pair otherwise).

        The data always crosses the link from its server side to its client side
        (s2c), so everything that follows the data is the same for both directions:
        in an upload the QUIC client runs on the server side of the link and the
        QUIC server on the client side. Each side's files (qlog, keys, app log) are
        under the link side's directory; the objects arrive in client/downloads."""
        peer = peer if peer is not None and peer.label != stack.label else stack
        upload = plan.direction == "upload"
        refused = unhonoured(stack, opts, receiver=peer) or (unhonoured_by_peer(peer, opts) if peer is not stack else None)
        if refused:
            self._flows = self.flows(stack, plan, SERVER_PORT)
            return TransferResult(stack=stack.name, cc=opts.cc, ok=False, unsupported=True, bytes=0, duration_s=0.0,
                                  reason=refused, goodput_bps=0.0, out_dir=str(self.out), transfer=self._flows[0],
                                  direction=plan.direction)
        if plan.rival and (upload or plan.quic_flows > 1):
            self._flows = self.flows(stack, plan, SERVER_PORT)
            return TransferResult(stack=stack.name, cc=opts.cc, ok=False, unsupported=True, bytes=0, duration_s=0.0,
                                  reason="a rival stack competes with one download of the stack under test",
                                  goodput_bps=0.0, out_dir=str(self.out), transfer=self._flows[0],
                                  direction=plan.direction)
        if upload and plan.quic_flows > 1:
            # Unsupported, as an endpoint's exit 127 is: the case is not judged.
            self._flows = self.flows(stack, plan, SERVER_PORT)
            return TransferResult(stack=stack.name, cc=opts.cc, ok=False, unsupported=True, bytes=0, duration_s=0.0,
                                  reason=f"an upload runs one QUIC client; this plan has {plan.quic_flows} (downloads only)",
                                  goodput_bps=0.0, out_dir=str(self.out), transfer=self._flows[0], direction="upload")
        # role → (its stack, the link side it runs on)
        self._ends = {"server": (peer if upload else stack, "client" if upload else "server"),
                      "client": (stack if upload else peer, "server" if upload else "client")}
        digests = write_objects(self.out / "www", plan.sizes, plan.seed)
        certs = self.out / "certs"
        write_certs(certs, padding=plan.cert_padding)
        dirs = {r: self.out / side for r, (_, side) in self._ends.items()}
        for d in dirs.values():
            (d / "qlog").mkdir(parents=True, exist_ok=True)
        common = contract_env(opts, plan)
        env = {
            r: dict(common, SSLKEYLOGFILE=str(d / "keys.log"), LL_APPLOG=str(d / "app.ndjson"))
            | ({"QLOGDIR": str(d / "qlog")} if opts.qlog else {})
            for r, d in dirs.items()
        }
        server_stack, client_stack = self._ends["server"][0], self._ends["client"][0]
        # A command may be an interop-runner endpoint, which serves on 443 whatever it is told.
        port = QIR_PORT if server_stack.command else SERVER_PORT
        self._flows = self.flows(stack, plan, port)
        addr = self.client_ip if upload else self.server_ip
        downloads = self.out / "client" / "downloads"
        downloads.mkdir(exist_ok=True)
        env["server"].update(LL_ADDR=addr, LL_PORT=str(port), LL_CERTS=str(certs))
        # The client gets the certificate too: a browser, which verifies even for QUIC,
        # is told to trust its key (harness/endpoints/chromium); the others ignore it.
        env["client"].update(REQUESTS=" ".join(f"https://{addr}:{port}/{n}" for n in digests), LL_CERTS=str(certs))
        # The sender reads the objects, the receiver writes them.
        env["client" if upload else "server"]["LL_WWW"] = str(self.out / "www")
        env["server" if upload else "client"]["LL_DOWNLOADS"] = str(downloads)
        if peer is not stack:  # a mixed pair: the receiver keeps the sender's controller if it has it
            for key, value in peer_env(peer, opts.cc or stack.default_cc).items():
                receiver = env["server" if upload else "client"]
                receiver.pop(key, None)
                receiver.update({key: value} if value else {})
        for role, params in (("server", "SERVER_PARAMS"), ("client", "CLIENT_PARAMS")):
            if self._ends[role][0].command:
                env[role].update({params: os.environ.get(params, ""), "LL_NETWORK_READY": "1"})
        server = self._start("server", env["server"])
        # An interop-runner endpoint prints no ready line: its bound port is the signal.
        waited = wait_ready(server, dirs["server"] / "stdout", timeout_s=10.0,
                             udp_port=port if server_stack.command else None, who=role_name(server_stack, "server"))
        if waited is not None:
            return self._result(stack, opts, server, None, digests, 0.0, waited)
        if plan.tcp_flows:
            failure = self._start_competitors(plan, opts.timeout_s)
            if failure:
                return self._result(stack, opts, server, None, digests, 0.0, failure)
        rival = None
        if plan.rival:
            rival, failure = self._start_rival_server(plan, opts, common, certs)
            if failure:
                return self._result(stack, opts, server, None, digests, 0.0, failure)
        started = time.monotonic()
        # Each endpoint's CPU reaches RUSAGE_CHILDREN when it is reaped; nothing
        # else this process starts is reaped in between.
        cpu_before = children_cpu_s()
        client = self._start("client", env["client"])
        others = [self._start_extra_client(client_stack, env["client"], k, opts) for k in range(2, plan.quic_flows + 1)]
        if rival is not None:
            others.append(self._start_rival_client(rival, common, digests, opts))
        try:
            client.wait(timeout=opts.timeout_s + 5.0)
        except subprocess.TimeoutExpired:
            stop_group(client)
            return self._result(stack, opts, server, client, digests, time.monotonic() - started,
                                f"client did not finish within {opts.timeout_s + 5.0:.0f} s")
        elapsed = time.monotonic() - started
        failure = self._wait_extra_clients(others, digests, started + opts.timeout_s + 5.0)
        if rival is not None:
            stop_group(self._rival_server)
        if failure:
            return self._result(stack, opts, server, client, digests, elapsed, failure)
        cpu_client = children_cpu_s()
        run_delay = group_run_delay_s(server.pid)
        stop_group(server)
        cpu = (cpu_client - cpu_before, children_cpu_s() - cpu_client)
        self._stop_competitors()
        result = self._result(stack, opts, server, client, digests, elapsed, None, cpu)
        result.server_run_delay_s = run_delay
        (self.out / "result.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")
        return result

    def _start(self, role: str, env: dict[str, str]) -> subprocess.Popen:
        """`role`'s endpoint on its link side (transfer's _ends), logs in that side's directory."""
        stack, side = self._ends[role]
        return self.start_endpoint(stack, role, env, self.out / side, side=side)

    def flows(self, stack: Stack, plan: TransferPlan, port: int) -> tuple[Flow, list[Flow]]:
        """The transfer's flow (the server's address and `port`) and the competitors'."""
        listener = "client" if plan.direction == "upload" else "server"
        transfer = Flow(stack.transport, listener, self.client_ip if listener == "client" else self.server_ip, port)
        competitors = [Flow("tcp", "client", self.client_ip, TCP_COMPETITOR_PORT)] if plan.tcp_flows else []
        if plan.rival:
            competitors.append(Flow(self._rival(plan)[0].transport, "server", self.server_ip, RIVAL_PORT))
        return transfer, competitors

    def _result(self, stack, opts, server, client, digests, elapsed, failure, cpu=(None, None)) -> TransferResult:
        ends = getattr(self, "_ends", {"server": (stack, "server"), "client": (stack, "client")})
        client_stack = ends["client"][0]
        downloads = self.out / "client" / "downloads"
        got = {n: sha256_of(downloads / n) for n in digests}
        size = sum((downloads / n).stat().st_size for n, h in got.items() if h is not None)
        rc = {"client": client.returncode if client else None, "server": server.returncode}
        unsupported = 127 in rc.values()
        reason = failure or ""
        if not reason:
            if unsupported:
                who = "client" if rc["client"] == 127 else "server"
                reason = (tail(self.out / ends[who][1] / "stderr")
                          or f"{ends[who][0].name} {who} reported unsupported (exit 127)")
            elif rc["client"] != 0:
                reason = (f"{role_name(client_stack, 'client')} exited with {rc['client']}: "
                          f"{tail(self.out / ends['client'][1] / 'stderr')}")
            elif any(got[n] != digests[n] for n in digests):
                bad = [n for n in digests if got[n] != digests[n]]
                reason = f"wrong or missing bytes in {', '.join(bad)}"
        duration = app_duration_s(self.out / "client" / "app.ndjson") or elapsed
        result = TransferResult(
            stack=stack.name, cc=opts.cc, ok=not reason, reason=reason, unsupported=unsupported,
            bytes=size, duration_s=duration, goodput_bps=(size * 8 / duration) if duration > 0 else 0.0,
            out_dir=str(self.out), client_rc=rc["client"], server_rc=rc["server"],
            client_cpu_s=cpu[0], server_cpu_s=cpu[1], wall_s=elapsed,
            transfer=self._flows[0], competitors=list(self._flows[1]),
            peer_stack=next((st.name for st, side in ends.values() if st.label != stack.label), None),
            direction="upload" if ends["client"][1] == "server" else "download",
        )
        (self.out / "result.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")
        return result


@contextlib.contextmanager
def interrupts_as_exceptions() -> Iterator[None]:
    """Turns SIGTERM into KeyboardInterrupt so `with Testbed` cleans up on it too.

    Only in this process: pyroute2 forks helpers (namespace creation) that inherit
    the handler, and a forked copy must die quietly, not run our cleanup.
    """
    owner = os.getpid()

    def handler(signum, frame):
        if os.getpid() != owner:
            os._exit(128 + signum)
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
