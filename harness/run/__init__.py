"""One example's run: which stack and controller (``Target``), everything that
determines the run (``Example``, saved as example.json so it can be replayed), and
the run itself, in real time on the testbed in force (namespaces, Docker, a user's
command) or in virtual time. The run writes its artifacts and its result (which
flows are the transfer and which compete) into the example's directory; observing
and judging them is for the rooms above (harness.observe, harness.verdict).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness.endpoints import CongestionControl, Stack
from harness.schedule import Schedule, TransferPlan
from harness.testbed.topology import EndpointOptions, TransferResult
from harness.virtual import RealTimeOnly  # noqa: F401  (raised by run_example in virtual mode)


@dataclass(frozen=True)
class Target:
    """A stack and one of its congestion controllers: what a property runs against,
    as the data's sender. `peer` is the receiver where it is another stack (a mixed
    pair); None is the same stack. `direction` "upload" makes the sender the client
    (docs/endpoints.md, LL_DIRECTION), "download" (the default) the server."""

    stack: Stack
    cc: CongestionControl
    peer: Stack | None = None
    direction: str = "download"

    @property
    def receiver(self) -> Stack:
        """The stack whose endpoint receives the transfer and sends the ACKs."""
        return self.peer or self.stack

    @property
    def sender_id(self) -> str:
        """The judged sender alone: its findings hold whatever the peer and direction."""
        return f"{self.stack.label}-{self.cc.name}".replace(":", "_")

    @property
    def id(self) -> str:
        return (self.sender_id + ("-upload" if self.direction == "upload" else "")
                + (f"-to-{self.peer.label}" if self.peer else ""))

    @classmethod
    def parse(cls, stack: str, cc: str | None, peer: str | None = None, direction: str = "download") -> Target:
        """The target as the backend in force runs it (a replay sets the one that produced it)."""
        from harness.testbed.docker_backend import load_for_run

        from harness.endpoints import receiver

        s = load_for_run(stack)
        other = load_for_run(peer) if peer and peer != stack else None
        return cls(s, s.resolve_cc(cc), receiver(s, other, direction), direction)


@dataclass(frozen=True)
class Example:
    """Everything that determines one run: replaying it needs nothing else."""

    nodeid: str
    stack: str
    cc: str
    schedule: Schedule
    plan: TransferPlan
    timeout_s: float = 60.0
    #: "real" (the testbed in force) or "virtual" (in-process, harness/virtual).
    mode: str = "real"
    #: The receiver's stack in a mixed pair (None: `stack` at both ends).
    peer: str | None = None

    def to_json(self) -> dict:
        return {
            "nodeid": self.nodeid, "stack": self.stack, "cc": self.cc,
            "schedule": self.schedule.to_json(),
            "plan": {"sizes": list(self.plan.sizes), "testcase": self.plan.testcase,
                     "think_ms": self.plan.think_ms, "seed": self.plan.seed,
                     "tcp_flows": self.plan.tcp_flows, "tcp_cc": self.plan.tcp_cc,
                     "quic_flows": self.plan.quic_flows, "direction": self.plan.direction}
                    | ({"cert_padding": self.plan.cert_padding} if self.plan.cert_padding else {})
                    | ({"window_cap": self.plan.window_cap} if self.plan.window_cap else {})
                    | ({"ack_hold_ms": self.plan.ack_hold_ms} if self.plan.ack_hold_ms else {}),
            "timeout_s": self.timeout_s,
            "mode": self.mode,
        } | ({"peer": self.peer} if self.peer else {})

    @classmethod
    def from_json(cls, d: dict) -> Example:
        p = d["plan"]
        plan = TransferPlan(sizes=tuple(p["sizes"]), testcase=p["testcase"], think_ms=p["think_ms"], seed=p["seed"],
                            tcp_flows=p.get("tcp_flows", 0), tcp_cc=p.get("tcp_cc", "cubic"),
                            quic_flows=p.get("quic_flows", 1), direction=p.get("direction", "download"),
                            cert_padding=p.get("cert_padding", 0), window_cap=p.get("window_cap", 0),
                            ack_hold_ms=p.get("ack_hold_ms", 0))
        return cls(d["nodeid"], d["stack"], d["cc"], Schedule.from_json(d["schedule"]), plan, d["timeout_s"],
                   d.get("mode", "real"), d.get("peer"))


#: The modes a run can be asked for ($LONGLOOK_MODE, the plugin's --mode): "auto"
#: is virtual time wherever the stack and the plan allow it, else real time.
MODES = ("auto", "real", "virtual")


def requested_mode() -> str:
    """The mode in force for the current test ($LONGLOOK_MODE; the pytest plugin sets
    it per case: "virtual" or "real", or "auto" where a plan decides)."""
    mode = os.environ.get("LONGLOOK_MODE") or "real"
    if mode not in MODES:
        raise ValueError(f"$LONGLOOK_MODE={mode!r}: use one of {', '.join(MODES)}")
    return mode


def mode_for(target: Target, plan: TransferPlan, requested: str | None = None) -> str:
    """The mode an example of `plan` on `target` runs in. "auto" is virtual time
    where the stack has a virtual backend and the plan needs no kernel (competing
    TCP flows, more QUIC connections than that backend runs), else real time: a
    choice recorded in the example, never hidden. "virtual" raises RealTimeOnly
    where virtual time cannot run it."""
    from harness import virtual

    requested = requested or requested_mode()
    if requested == "real":
        return "real"
    if target.peer is not None:
        if requested == "auto":
            return "real"
        raise RealTimeOnly(f"a mixed pair ({target.peer.name} receiving) runs in real time: the virtual "
                           "backends run one stack at both ends")
    try:
        why = virtual.supports(target.stack.name)
        if why:
            raise RealTimeOnly(why)
        virtual.check_plan(plan, target.stack.name)
    except RealTimeOnly:
        if requested == "auto":
            return "real"
        raise
    return "virtual"


class Inconclusive(Exception):
    """The run cannot decide the property (e.g. an endpoint saturated a CPU core, or
    the stack reported the case unsupported); never a verdict on the stack."""


def run_example(example: Example, target: Target, out: Path) -> TransferResult:
    """Runs the transfer of `example` into `out`; a transfer that is unsupported is
    Inconclusive, one that fails is returned for the property to judge. It runs in
    `example.mode` (see `mode_for`); in virtual time, a stack or plan that needs
    real time raises harness.virtual.RealTimeOnly."""
    opts = EndpointOptions(cc=None if target.cc.name == target.stack.default_cc else target.cc.name,
                           timeout_s=example.timeout_s, max_window=example.plan.window_cap or None,
                           ack_hold_ms=example.plan.ack_hold_ms)
    if example.mode == "virtual":
        from harness import virtual

        result = virtual.transfer(example.schedule, out, target.stack, example.plan, opts)
    else:
        # The backend in force ($LONGLOOK_BACKEND: local namespaces or Docker containers).
        from harness.testbed.docker_backend import open_testbed

        with open_testbed(example.schedule, out, target.stack) as bed:
            result = bed.transfer(target.stack, example.plan, opts, peer=target.peer)
    if result.unsupported:
        raise Inconclusive(f"{target.id}: {result.reason}")
    return result


def baseline_target(family: str) -> Target | None:
    """Kernel TCP with a controller of `family`, the baseline a property compares a
    stack against; None when the kernel endpoint has none of that family."""
    from harness.testbed.docker_backend import load_for_run

    tcp = load_for_run("tcp")
    cc = next((c for c in tcp.cc.values() if c.family == family), None)
    return Target(tcp, cc) if cc else None


def provenance(stack: Stack) -> dict:
    """How the run was made (backend, image or command), for example.json."""
    from harness.testbed.docker_backend import provenance as backend_provenance

    return backend_provenance(stack)


def replay_command(example_dir: Path) -> str:
    return f"longlook replay {example_dir}"
