"""Flows that compete with the transfer on the link, for the testbed: more clients of
the same stack (TransferPlan.quic_flows), kernel TCP flows (tcp_flows, iperf3), and a
rival stack's download from its own server (rival: pairwise fairness). A mixin of
harness.testbed.topology.Testbed, which calls these around its transfer."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from harness.endpoints import Stack
from harness.schedule import TransferPlan
from harness.testbed import lifeline
from harness.testbed.contract import EndpointOptions, sha256_of
from harness.testbed.procs import listening, stop_group, tail, wait_ready

#: Competing TCP flows run this long before the QUIC transfer starts, s.
TCP_WARMUP_S = 2.0
#: iperf3's port for competing TCP flows (the QUIC server listens on SERVER_PORT).
TCP_COMPETITOR_PORT = 5201
#: The rival stack's server (TransferPlan.rival), beside the transfer's.
RIVAL_PORT = 4434


class Competition:
    """The competing flows' processes; Testbed provides out, the namespaces, the
    addresses, start_endpoint and _procs."""

    def _start_extra_client(self, stack: Stack, base_env: dict[str, str], k: int, opts: EndpointOptions):
        """The k-th QUIC client (k ≥ 2), in client-k/ with its own downloads, keys and qlog."""
        d = self.out / f"client-{k}"
        (d / "downloads").mkdir(parents=True, exist_ok=True)
        env = dict(base_env, SSLKEYLOGFILE=str(d / "keys.log"), LL_APPLOG=str(d / "app.ndjson"),
                   LL_DOWNLOADS=str(d / "downloads"))
        if opts.qlog:
            (d / "qlog").mkdir(exist_ok=True)
            env["QLOGDIR"] = str(d / "qlog")
        return d, self.start_endpoint(stack, "client", env, d)

    def _rival(self, plan: TransferPlan) -> tuple[Stack, str]:
        """The rival's stack and controller name (TransferPlan.rival, "stack[:cc]")."""
        from harness import endpoints

        name, _, cc = plan.rival.partition(":")
        rival = endpoints.load(name)
        return rival, rival.resolve_cc(cc or None).name

    def _start_rival_server(self, plan: TransferPlan, opts: EndpointOptions, common: dict[str, str],
                            certs: Path) -> tuple[tuple[Stack, str] | None, str | None]:
        """The rival stack's server on RIVAL_PORT, in rival-server/, serving the same
        objects; ((stack, cc), None) once ready, or (None, why not)."""
        stack, cc = self._rival(plan)
        d = self.out / "rival-server"
        (d / "qlog").mkdir(parents=True, exist_ok=True)
        env = dict(common, SSLKEYLOGFILE=str(d / "keys.log"), LL_APPLOG=str(d / "app.ndjson"), LL_ADDR=self.server_ip,
                   LL_PORT=str(RIVAL_PORT), LL_CERTS=str(certs), LL_WWW=str(self.out / "www"),
                   **({"QLOGDIR": str(d / "qlog")} if opts.qlog else {}))
        # The rival runs as its stack comes: its own controller, no cap or offload switch of the transfer's.
        env.pop("LL_CC", None)
        env.pop("LL_MAX_WINDOW", None)
        env.pop("LL_OFFLOAD", None)
        if cc != stack.default_cc:
            env["LL_CC"] = cc
        proc = self.start_endpoint(stack, "server", env, d, side="server")
        failure = wait_ready(proc, d / "stdout", timeout_s=10.0, who=f"rival {stack.name} server")
        self._rival_server = proc
        return (None, failure) if failure else ((stack, cc), None)

    def _start_rival_client(self, rival: tuple[Stack, str], common: dict[str, str], digests: dict[str, str],
                            opts: EndpointOptions):
        """The rival stack's client in rival-client/, fetching the objects from its own server."""
        stack, cc = rival
        d = self.out / "rival-client"
        (d / "downloads").mkdir(parents=True, exist_ok=True)
        env = dict(common, SSLKEYLOGFILE=str(d / "keys.log"), LL_APPLOG=str(d / "app.ndjson"),
                   LL_DOWNLOADS=str(d / "downloads"), LL_CERTS=str(self.out / "certs"),
                   REQUESTS=" ".join(f"https://{self.server_ip}:{RIVAL_PORT}/{n}" for n in digests),
                   **({"QLOGDIR": str(d / "qlog")} if opts.qlog else {}))
        if opts.qlog:
            (d / "qlog").mkdir(exist_ok=True)
        env.pop("LL_CC", None)
        env.pop("LL_MAX_WINDOW", None)
        env.pop("LL_OFFLOAD", None)
        if cc in stack.cc and cc != stack.default_cc:
            env["LL_CC"] = cc
        return d, self.start_endpoint(stack, "client", env, d, side="client")

    def _wait_extra_clients(self, others, digests: dict[str, str], deadline: float) -> str | None:
        """Waits for the extra clients; the first problem among them, or None."""
        for d, proc in others:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                stop_group(proc)
                return f"{d.name} did not finish in time"
            if proc.returncode != 0:
                return f"{d.name} exited with {proc.returncode}: {tail(d / 'stderr')}"
            bad = [n for n, h in digests.items() if sha256_of(d / "downloads" / n) != h]
            if bad:
                return f"{d.name}: wrong or missing bytes in {', '.join(bad)}"
        return None

    def _start_competitors(self, plan: TransferPlan, timeout_s: float) -> str | None:
        """Kernel TCP flows (iperf3, `plan.tcp_cc`) from the server's host to the
        client's, sharing the bottleneck with the QUIC flow; returns a failure or None."""
        logs = self.out / "tcp"
        logs.mkdir(exist_ok=True)
        receiver = self._spawn(self.client_ns, ["iperf3", "-s", "-1", "-p", str(TCP_COMPETITOR_PORT)], logs / "receiver")
        deadline = time.monotonic() + 5.0
        while not listening(self.client_ns, TCP_COMPETITOR_PORT):
            if receiver.poll() is not None or time.monotonic() > deadline:
                return f"iperf3 receiver did not start: {tail(logs / 'receiver.stderr')}"
            time.sleep(0.05)
        duration = int(TCP_WARMUP_S + timeout_s + 10)
        self._spawn(self.server_ns, [
            "iperf3", "-c", self.client_ip, "-p", str(TCP_COMPETITOR_PORT), "-P", str(plan.tcp_flows),
            "-C", plan.tcp_cc, "-t", str(duration), "-J",
        ], logs / "sender")
        time.sleep(TCP_WARMUP_S)
        return None

    def _spawn(self, ns: str, argv: list[str], log_stem: Path) -> subprocess.Popen:
        out, err = (log_stem.with_suffix(".stdout")).open("wb"), (log_stem.with_suffix(".stderr")).open("wb")
        with out, err:
            proc = lifeline.popen(["ip", "netns", "exec", ns, *argv], stdout=out, stderr=err,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
        self._competitors.append(proc)
        self._procs.append(proc)  # stopped with the endpoints if anything goes wrong
        return proc

    def _stop_competitors(self) -> None:
        for proc in self._competitors:
            stop_group(proc)
        self._competitors.clear()

