"""Running an experiment's sweep: one transfer per (stack, point, run), cached.

Every finished run is appended to DIR/runs.ndjson and flushed before the next
starts, so an interrupted sweep loses at most the run under way and the next call
with the same DIR continues where it stopped. A run is keyed by everything that
determines it (experiment, stack, controller, point, run index, size), so changing
the experiment's size or conditions never reuses an old figure. Failed transfers
(a timeout at heavy loss) are results too: they are kept and shown, not retried.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from harness.reproduce.experiments import WINDOW_CAP_DATAGRAM, Experiment, Point
from harness.schedule import IidLoss, LinkSettings, Phase, Schedule, TransferPlan

#: Full-size packets for the default queue of one BDP, and its floor.
MTU = 1500
MIN_QUEUE_PACKETS = 10
#: Bytes a packet carries, for the loss-limited rate estimate that sizes the timeout.
SEGMENT = 1200


@dataclass(frozen=True)
class Run:
    stack: str
    cc: str
    point: Point
    index: int
    #: The client the stack's server sends to, where not its own (a browser, say).
    peer: str | None = None
    #: Another stack's download competing with this one ("stack:cc"; "pairs" experiments).
    rival: str | None = None
    #: False: both ends with their segmentation offloads off (LL_OFFLOAD=off).
    offload: bool = True

    @property
    def target(self) -> str:
        return label(self.stack, self.cc, self.peer, self.rival, self.offload)

    def key(self, e: Experiment) -> str:
        return f"{e.name}|{self.target}|{self.point.x:g}|{self.index}|{size_of(e, self.point)}"


def label(stack: str, cc: str, peer: str | None = None, rival: str | None = None, offload: bool = True) -> str:
    """A column of the table: the stack-controller, its client where another stack's
    (Target.id's shape), its rival where it has one, and "no-offload" where the run
    switched the offloads off. Runs and their records name columns alike through it."""
    return (f"{stack}-{cc}" + (f"-to-{peer}" if peer else "") + (f"-vs-{rival.replace(':', '-')}" if rival else "")
            + ("-no-offload" if not offload else ""))


def record_label(rec: dict) -> str:
    return label(rec["stack"], rec["cc"], rec.get("peer"), rec.get("rival"), rec.get("offload", True))


def size_of(e: Experiment, p: Point) -> int:
    return p.size_bytes or e.size_bytes


def schedule(e: Experiment, p: Point, seed: int) -> Schedule:
    """The point's link, the same each way: rate, half the RTT of delay, iid loss,
    a drop-tail queue of the experiment's size or one BDP."""
    bdp = p.rate_bps * p.rtt_us // 8_000_000
    queue = e.queue_bytes or max(int(bdp * e.queue_bdps), MIN_QUEUE_PACKETS * MTU)
    s = LinkSettings(rate_bps=p.rate_bps, delay_us=p.rtt_us // 2, queue_bytes=queue,
                     loss=IidLoss(p.loss) if p.loss > 0 else None, jitter_us=p.jitter_us or None,
                     jitter_reorders=True if p.reorders else None)
    phases = [Phase(start_us=0, c2s=s, s2c=s)]
    if p.drop_to_bps:
        # The same queue in bytes: at a tenth of the rate it holds ten times the delay.
        slow = replace(s, rate_bps=p.drop_to_bps)
        phases.append(Phase(start_us=p.drop_at_us, c2s=slow, s2c=slow))
    return Schedule(seed=seed, phases=tuple(phases))


def timeout_s(e: Experiment, p: Point) -> float:
    """Four times the time a loss-limited sender needs (Mathis et al.: rate ≤
    1.22·MSS/(RTT·√p)), or a capped window (one per round trip), plus a minute: long enough for a slow stack at heavy loss,
    short enough that a stalled one does not hold the sweep for long."""
    rate = min(p.rate_bps, p.drop_to_bps or p.rate_bps)
    if p.loss > 0:
        rate = min(rate, 1.22 * SEGMENT * 8 / (p.rtt_us / 1e6 * math.sqrt(p.loss)))
    if p.window_cap_packets:  # one capped window per round trip at most
        rate = min(rate, p.window_cap_packets * WINDOW_CAP_DATAGRAM * 8 / (p.rtt_us / 1e6))
    return 4 * size_of(e, p) * 8 / rate + 60


def done(path: Path) -> dict[str, dict]:
    """The runs already in `path`, by key (a torn last line from a kill is skipped)."""
    out: dict[str, dict] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "key" in rec:
            out[rec["key"]] = rec
    return out


def plan(e: Experiment, targets: list[tuple[str, str, str | None]], runs: int, xs: tuple[float, ...],
         switchable: Callable[[str], bool] = lambda stack: False) -> list[Run]:
    """The runs of (stack, controller, client or None) targets at the points `xs`. A
    "pairs" experiment pairs each target with every later one and with each of the
    experiment's rivals, once per pair. An experiment that measures offloads
    (`offload_both`) runs each target again with them off where `switchable` says
    both its ends can switch them (caps.json honours.offload)."""
    if e.measure == "pairs":
        rivals = [[f"{s}:{c}" for s, c, _ in targets[k + 1:]] + list(e.rivals) for k in range(len(targets))]
        return [Run(stack, cc, e.point(x), i, None, rival) for (stack, cc, _), theirs in zip(targets, rivals)
                for rival in theirs if rival != f"{stack}:{cc}" for x in xs for i in range(runs)]
    offloads = lambda stack, peer: ((True, False) if e.offload_both and switchable(stack)  # noqa: E731
                                    and (peer is None or switchable(peer)) else (True,))
    return [Run(stack, cc, e.point(x), i, peer, offload=off) for stack, cc, peer in targets
            for off in offloads(stack, peer) for x in xs for i in range(runs)]


def sweep(e: Experiment, todo: list[Run], out: Path, transfer: Callable[[Run, Path], dict],
          progress: Callable[[int, int], None] = lambda done, total: None, keep: bool = False) -> list[dict]:
    """Runs what `out`/runs.ndjson does not hold yet, appending each result as it
    comes; returns the records of `todo` (old and new). `transfer(run, dir)` makes
    one run's record fields (ok, mode, duration_s, goodput_bps, reason). A run's
    artifacts are removed once its record is written, unless `keep`."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "runs.ndjson"
    have = done(path)
    records = []
    with path.open("a") as f:
        for n, run in enumerate(todo):
            progress(n, len(todo))
            key = run.key(e)
            if key not in have:
                rundir = out / "runs" / key.replace("|", "_")
                if rundir.exists():
                    shutil.rmtree(rundir)  # an interrupted run's leftovers: it starts afresh
                started = time.time()
                rec = {"key": key, "experiment": e.name, "stack": run.stack, "cc": run.cc,
                       **({"peer": run.peer} if run.peer else {}), **({"rival": run.rival} if run.rival else {}),
                       **({"offload": False} if not run.offload else {}),
                       "x": run.point.x,
                       "run": run.index, "size_bytes": size_of(e, run.point), **transfer(run, rundir),
                       "wall_s": round(time.time() - started, 3), "date": time.strftime("%Y-%m-%d")}
                f.write(json.dumps(rec) + "\n")
                f.flush()
                have[key] = rec
                if not keep:
                    shutil.rmtree(rundir, ignore_errors=True)
            records.append(have[key])
        progress(len(todo), len(todo))
    return records


def local_transfer(e: Experiment, mode_of: Callable[[str], str]) -> Callable[[Run, Path], dict]:
    """The real transfer of a run: virtual time where `mode_of(stack)` says so, else
    the testbed in force, without packet capture (the sweep reads only the result)."""
    from harness.testbed.contract import EndpointOptions
    from harness.testbed.docker_backend import load_for_run, open_testbed
    from harness.testbed.topology import interrupts_as_exceptions

    def one(run: Run, rundir: Path) -> dict:
        stack = load_for_run(run.stack)
        cc = stack.resolve_cc(run.cc)
        cap = run.point.window_cap_packets * WINDOW_CAP_DATAGRAM or None
        opts = EndpointOptions(cc=None if cc.name == stack.default_cc else cc.name, timeout_s=timeout_s(e, run.point),
                               max_window=cap, offload=run.offload)
        n, total = max(1, run.point.objects), size_of(e, run.point)
        sizes = tuple(total // n + (1 if i < total % n else 0) for i in range(n))
        tp = TransferPlan(sizes=sizes, testcase="multiplexing" if n > 1 else "transfer",
                          tcp_flows=run.point.tcp_flows, rival=run.rival)
        sched = schedule(e, run.point, seed=run.index + 1)
        peer = load_for_run(run.peer) if run.peer else None
        # Virtual time runs a stack with itself; a pair with another client or a rival
        # runs in real time.
        mode = "real" if peer is not None or run.rival else mode_of(run.stack)
        if mode == "virtual":
            from harness import virtual

            result = virtual.transfer(sched, rundir, stack, tp, opts)
        else:
            with interrupts_as_exceptions(), open_testbed(sched, rundir, stack, pcap=False) as bed:
                result = bed.transfer(stack, tp, opts, peer=peer)
        rec = {"mode": mode, "ok": bool(result.ok), "duration_s": round(result.duration_s, 4),
               "goodput_bps": round(result.goodput_bps), "reason": result.reason or ""}
        if result.unsupported:
            rec["unsupported"] = True
        if mode == "real" and result.client_cpu_s is not None and result.server_cpu_s is not None:
            rec["cpu_s"] = {"client": round(result.client_cpu_s, 3), "server": round(result.server_cpu_s, 3)}
        if run.point.tcp_flows and result.ok:
            from harness.reproduce.flows import shares_mbps

            rec["flows_mbps"] = shares_mbps(rundir, result.transfer, run.point.tcp_flows)
        if run.rival and result.ok:
            from harness.reproduce.flows import pair_shares_mbps

            rec["flows_mbps"] = pair_shares_mbps(rundir, result.transfer, result.competitors[-1])
        if n > 1 and result.ok:
            from harness.reproduce.flows import object_completions_s

            rec["objects_s"] = object_completions_s(rundir)
        return rec

    return one
