"""The endpoint contract as the testbed fills it (docs/endpoints.md): the options
both endpoints are given, the environment that carries them, the objects the server
serves, and what a transfer gives back (``TransferResult``, written as result.json,
with the flows the verdicts select by). Shared by every backend: namespaces,
Docker, a user's command, and virtual time."""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from harness.schedule import Flow, TransferPlan

#: Default flow-control window: far above any BDP a property uses.
FLOW_WINDOW = 64 * 2**20
#: An endpoint using this fraction of a core over a transfer is the bottleneck itself.
SATURATED_CPU = 0.9
#: An endpoint that waited this fraction of the transfer for a CPU was starved by
#: other load on the host: its goodput says nothing about its congestion control.
STARVED_RUN_DELAY = 0.10
@dataclass(frozen=True)
class EndpointOptions:
    """Contract options given to both endpoints; None leaves the stack's default."""

    cc: str | None = None
    max_datagram_size: int | None = None
    initial_window: int | None = None
    flow_window: int = FLOW_WINDOW
    timeout_s: float = 60.0
    #: False: QLOGDIR is not set, so endpoints write no qlog (benchmarks measure its cost).
    qlog: bool = True
    #: A ceiling on the sender's congestion window, bytes (LL_MAX_WINDOW): only for
    #: stacks that declare it (caps.json honours.max_window); see `unhonoured`.
    max_window: int | None = None
    #: False: the endpoints switch off the segmentation offloads their stack uses
    #: (GSO on send, GRO on receive; LL_OFFLOAD=off), for stacks that declare the
    #: switch (caps.json honours.offload); True leaves each stack's default.
    offload: bool = True
    #: The receiver holds each ACK this long, ms (LL_ACK_HOLD_MS; TransferPlan.ack_hold_ms):
    #: only for receivers that declare it (caps.json honours.ack_hold); see `unhonoured`.
    ack_hold_ms: int = 0


@dataclass
class TransferResult:
    stack: str
    cc: str | None
    ok: bool
    #: Why the run failed or was unsupported ("" when ok).
    reason: str
    unsupported: bool
    bytes: int
    duration_s: float
    goodput_bps: float
    out_dir: str
    client_rc: int | None = None
    server_rc: int | None = None
    files: dict[str, str] = field(default_factory=dict)
    #: CPU time (user + system) of each endpoint's process tree, s; None if unknown.
    client_cpu_s: float | None = None
    server_cpu_s: float | None = None
    #: Wall time from the client's start to its exit, s (start-up included, as in the CPU times).
    wall_s: float | None = None
    #: Time the server's threads spent runnable but waiting for a CPU, s (other load).
    server_run_delay_s: float | None = None
    #: The flow under test, and the flows competing with it, as the ground truth
    #: will show them: every verdict selects the transfer's packets by these.
    transfer: Flow | None = None
    competitors: list[Flow] = field(default_factory=list)
    #: The receiver's stack where it is not `stack` (a mixed pair: `stack` sends,
    #: this one receives); its qlog, on the link's client side, is read in its own
    #: dialect.
    peer_stack: str | None = None
    #: "download" (the server sends) or "upload" (the client sends). Either way the
    #: sender runs on the link's server side and the data crosses it s2c.
    direction: str = "download"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> TransferResult:
        """The result as result.json holds it (extra keys, e.g. a virtual run's statistics, ignored)."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in names}
        if values.get("transfer"):
            values["transfer"] = Flow.from_json(values["transfer"])
        values["competitors"] = [Flow.from_json(c) for c in values.get("competitors") or []]
        return cls(**values)

    def saturated(self, threshold: float = SATURATED_CPU) -> str | None:
        """Which endpoint used at least `threshold` of a core over the transfer (its
        goodput is then endpoint-bound, not link-bound), or None."""
        for side, cpu in (("client", self.client_cpu_s), ("server", self.server_cpu_s)):
            if cpu is not None and self.wall_s and cpu / self.wall_s >= threshold:
                return f"{self.stack} {side} used {cpu:.2f} s of CPU in {self.wall_s:.2f} s"
        delay = self.server_run_delay_s
        if delay is not None and self.wall_s and delay / self.wall_s >= STARVED_RUN_DELAY:
            return (f"{self.stack} server waited {delay:.2f} s of {self.wall_s:.2f} s for a CPU "
                    f"(the host was busy with other work)")
        return None


#: Bytes of an object drawn and written at a time: a 1 GB object (zhang-1gbit) in one
#: draw overflows randbytes and would sit whole in memory. Objects up to this size
#: are one draw, as they always were, so their bytes for a given seed are unchanged.
OBJECT_CHUNK = 64 * 2**20


def write_objects(www: Path, sizes: tuple[int, ...], seed: int) -> dict[str, str]:
    """Writes the objects the server serves; returns {name: sha256}."""
    www.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    digests = {}
    for i, size in enumerate(sizes):
        name = f"object-{i}-{size}.bin"
        h = hashlib.sha256()
        with (www / name).open("wb") as f:
            for start in range(0, size, OBJECT_CHUNK):
                data = rng.randbytes(min(OBJECT_CHUNK, size - start))
                f.write(data)
                h.update(data)
        digests[name] = h.hexdigest()
    return digests


def sha256_of(path: Path) -> str | None:
    if not path.exists():
        return None
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def contract_env(opts: EndpointOptions, plan: TransferPlan) -> dict[str, str]:
    env = {
        "TESTCASE": plan.testcase,
        "LL_FLOW_WINDOW": str(opts.flow_window),
        "LL_TIMEOUT_S": str(int(opts.timeout_s)),
        "LL_THINK_MS": str(plan.think_ms),
    }
    if plan.direction != "download":
        env["LL_DIRECTION"] = plan.direction
    if opts.cc:
        env["LL_CC"] = opts.cc
    if opts.max_datagram_size:
        env["LL_MAX_DATAGRAM_SIZE"] = str(opts.max_datagram_size)
    if opts.initial_window:
        env["LL_INITIAL_WINDOW"] = str(opts.initial_window)
    if opts.max_window:
        env["LL_MAX_WINDOW"] = str(opts.max_window)
    if not opts.offload:
        env["LL_OFFLOAD"] = "off"
    if opts.ack_hold_ms:
        env["LL_ACK_HOLD_MS"] = str(opts.ack_hold_ms)
    return env


def unhonoured(stack, opts: EndpointOptions, receiver=None) -> str | None:
    """Why `stack` cannot run with `opts`, decided before it starts, for an option its
    endpoint would not refuse itself: LL_MAX_WINDOW, LL_OFFLOAD and LL_ACK_HOLD_MS are
    newer than most endpoints, which ignore variables they do not know and would run
    uncapped, with their offloads on, or acknowledging on their own timing.
    `receiver` is the stack that receives the transfer (default `stack`: a pair of
    one stack), whose endpoint must honour LL_ACK_HOLD_MS. None: it can."""
    receiver = receiver or stack
    if opts.ack_hold_ms and not receiver.honours.get("ack_hold"):
        return (f"held acknowledgements (LL_ACK_HOLD_MS={opts.ack_hold_ms}) unsupported: the receiver "
                f"{receiver.name}'s endpoint does not declare them (caps.json honours.ack_hold)")
    if opts.max_window and not stack.honours.get("max_window"):
        return (f"a window cap (LL_MAX_WINDOW={opts.max_window}) unsupported: {stack.name}'s endpoint does not "
                "declare it (caps.json honours.max_window)")
    if not opts.offload and not stack.honours.get("offload"):
        return (f"offloads off (LL_OFFLOAD=off) unsupported: {stack.name}'s endpoint does not declare the switch "
                "(caps.json honours.offload)")
    return None


def unhonoured_by_peer(peer, opts: EndpointOptions) -> str | None:
    """As `unhonoured`, for the receiver of a mixed pair: a window cap is the sender's
    alone, but offloads off means both ends (the receiver's GRO as much as the
    sender's GSO)."""
    if not opts.offload and not peer.honours.get("offload"):
        return (f"offloads off (LL_OFFLOAD=off) unsupported: the receiver {peer.name}'s endpoint does not declare "
                "the switch (caps.json honours.offload)")
    return None


def peer_env(peer, server_cc: str) -> dict[str, str | None]:
    """What changes in a mixed pair's client environment: the server's controller
    where the client's stack has one of that name (a receiver's controller moves only
    its ACKs, but a shared name keeps the pair symmetric), else the client's default
    (None removes LL_CC), so a receiver is never refused for the sender's choice."""
    name = {"reno": "newreno"}.get(server_cc, server_cc)
    return {"LL_CC": name if name in peer.cc else None}


def app_duration_s(applog: Path) -> float | None:
    """First request_start to last request_done in the client's app log, seconds."""
    if not applog.exists():
        return None
    starts, dones = [], []
    for line in applog.read_text(errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError, AttributeError):
            ev = json.loads(line)
            if ev.get("event") == "request_start":
                starts.append(ev["t_us"])
            elif ev.get("event") == "request_done":
                dones.append(ev["t_us"])
    if not starts or not dones:
        return None
    return (max(dones) - min(starts)) / 1e6
