"""The `longlook reproduce` command's arguments and its sweep (harness/cli.py renders the table)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.reproduce import experiments, sweep

#: Stacks a reproduction runs unless --impl says otherwise: one QUIC stack that runs
#: in virtual time, and the kernel TCP baseline the studies compared against.
DEFAULT_IMPLS = ("aioquic", "tcp")


def add_parser(sub) -> None:
    rp = sub.add_parser("reproduce", help="re-run a seed study's experiment on today's stacks and print its "
                                          "table beside the published figures (docs/reproductions.md)")
    rp.add_argument("experiment", nargs="?", help="the experiment (see --list)")
    rp.add_argument("--list", action="store_true", help="list the experiments and their conditions")
    rp.add_argument("--impl", action="append", help=f"a stack (repeatable; default: {', '.join(DEFAULT_IMPLS)})")
    rp.add_argument("--client", metavar="STACK",
                    help="the client every --impl's server sends to: chromium or firefox fetch as the studies' "
                         "browsers did (real time); default each stack's own client")
    rp.add_argument("--cc", help="the controller for every --impl (default: the study's where a stack has it, "
                                 "else each stack's own)")
    rp.add_argument("--runs", type=int, help="runs per point (default: the experiment's; --quick: 1)")
    rp.add_argument("--quick", action="store_true", help="a few points, one run each: minutes, not hours")
    rp.add_argument("--mode", choices=("auto", "real", "virtual"), default="auto",
                    help="virtual time where the stack runs in it (auto, the default), or always real/virtual")
    rp.add_argument("--keep", action="store_true", help="keep each run's artifacts under OUT/runs/")
    rp.add_argument("--out", type=Path, help="the directory for runs.ndjson (the resumable cache), the table and plot")


def _list() -> None:
    for e in experiments.EXPERIMENTS.values():
        xs = ", ".join(f"{p.x:g}" for p in e.points)
        quick = ", ".join(f"{x:g}" for x in e.quick)
        size = "" if any(p.size_bytes for p in e.points) else f"{e.size_bytes // 1_000_000} MB, "
        print(f"{e.name}: {e.title}\n  {e.axis}: {xs} (--quick: {quick}); {size}{e.runs} runs\n  source: {e.source}")
    for name, why in experiments.PLANNED.items():
        print(f"{name}: not runnable yet: needs {why}")


def _mode_of(requested: str):
    from harness import virtual

    def mode(stack: str) -> str:
        if requested == "real" or (requested == "auto" and virtual.supports(stack)):
            return "real"
        if virtual.supports(stack):
            raise virtual.RealTimeOnly(virtual.supports(stack))
        return "virtual"

    return mode


def run(a: argparse.Namespace, progress):
    """The experiment and its runs' records (old and new), or None after --list.
    Raises experiments.ExperimentError, StackError or UnitError for bad input (the
    caller prints them); the caller renders the table (harness/report/reproduction.py)."""
    from harness import virtual
    from harness.endpoints import StackError, receiver
    from harness.schedule.units import UnitError
    from harness.testbed.docker_backend import load_for_run

    if a.list:
        _list()
        return None
    if not a.experiment:
        raise UnitError("reproduce: name an experiment, or give --list")
    e = experiments.get(a.experiment)
    if a.out is None:
        raise UnitError("reproduce: --out DIR is required (the runs' cache; give the same DIR to resume)")
    runs = a.runs if a.runs is not None else (1 if a.quick else e.runs)
    if runs < 1:
        raise UnitError(f"--runs {runs}: give at least 1")
    mode = a.mode
    if any(p.tcp_flows for p in e.points) or e.real_time:
        if mode == "virtual":
            why = ("runs kernel TCP flows" if not e.real_time else
                   "runs two stacks' downloads at once" if e.measure == "pairs" else "measures CPU per side")
            raise UnitError(f"--mode virtual: {e.name} {why}, which only real time can")
        mode = "real"
    if e.measure == "pairs" and a.client:
        raise UnitError(f"--client {a.client}: {e.name} pairs each stack's own client and server with a rival's")
    if a.client and mode == "virtual":
        raise UnitError(f"--mode virtual --client {a.client}: virtual time runs a stack with itself; "
                        "a pair with another client runs in real time (drop --mode virtual)")
    mode_of = _mode_of(mode)
    client = load_for_run(a.client) if a.client else None
    if client is not None and not client.is_built():
        raise StackError(f"{a.client} is not built; run `make setup`")
    targets = []
    for name in a.impl or DEFAULT_IMPLS:
        stack = load_for_run(name)
        if not stack.is_built():
            raise StackError(f"{name} is not built; run `make setup`")
        # A download from `stack`'s server to the named client (StackError where the
        # two cannot pair, naming the fix); None is the stack with itself.
        peer = receiver(stack, client, "download")
        try:
            for end in (name, *([peer.label] if peer else [])):
                mode_of(end)
        except virtual.RealTimeOnly as err:
            raise StackError(f"--mode virtual: {err}") from None
        cc = a.cc or (e.cc if e.cc in stack.cc else None)
        targets.append((name, stack.resolve_cc(cc).name, peer.label if peer else None))
    for rival in e.rivals:
        name = rival.partition(":")[0]
        if not load_for_run(name).is_built():
            raise StackError(f"{name} (a rival in {e.name}) is not built; run `make setup`")
    xs = e.quick if a.quick else tuple(p.x for p in e.points)
    todo = sweep.plan(e, targets, runs, xs, switchable=lambda name: bool(load_for_run(name).honours.get("offload")))
    records = sweep.sweep(e, todo, a.out, sweep.local_transfer(e, mode_of), progress=progress, keep=a.keep)
    return e, records
