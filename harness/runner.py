"""One property example end to end: run a transfer under a schedule, observe it, keep
the artifacts of failures, and make every failure replayable.

    with runner.run(target, schedule, plan) as obs:
        assert ..., message built from obs

A verdict drawn across runs (repetitions, or a kernel TCP baseline against the stack)
wraps them in ``runner.together()``, so that when it fails every run behind it is
kept, not only the one that happened to raise:

    with runner.together():
        for rep in range(runs):
            with runner.run(...) as obs:
                ratios.append(...)
        assert ..., message built from ratios

An example's directory holds example.json (everything needed to run it again),
the testbed's artifacts (schedule, ground truth, pcap, qlog, key logs) and, when it
failed, verdict.txt. Passing examples' directories are removed unless asked to keep.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import traceback
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis.errors import UnsatisfiedAssumption

from harness.endpoints import CongestionControl, Stack
from harness.groundtruth import GroundTruth, read_log
from harness.schedule import Schedule
from harness.topology import EndpointOptions, Testbed, TransferPlan, TransferResult


@dataclass(frozen=True)
class Target:
    """A stack and one of its congestion controllers: what a property runs against."""

    stack: Stack
    cc: CongestionControl

    @property
    def id(self) -> str:
        return f"{self.stack.name}-{self.cc.name}".replace(":", "_")

    @classmethod
    def parse(cls, stack: str, cc: str | None) -> Target:
        """The target as the backend in force runs it (a replay sets the one that produced it)."""
        from harness.docker_backend import load_for_run

        s = load_for_run(stack)
        return cls(s, s.resolve_cc(cc))


@dataclass(frozen=True)
class Example:
    """Everything that determines one run: replaying it needs nothing else."""

    nodeid: str
    stack: str
    cc: str
    schedule: Schedule
    plan: TransferPlan
    timeout_s: float = 60.0

    def to_json(self) -> dict:
        return {
            "nodeid": self.nodeid, "stack": self.stack, "cc": self.cc,
            "schedule": self.schedule.to_json(),
            "plan": {"sizes": list(self.plan.sizes), "testcase": self.plan.testcase,
                     "think_ms": self.plan.think_ms, "seed": self.plan.seed,
                     "tcp_flows": self.plan.tcp_flows, "tcp_cc": self.plan.tcp_cc,
                     "quic_flows": self.plan.quic_flows},
            "timeout_s": self.timeout_s,
        }

    @classmethod
    def from_json(cls, d: dict) -> Example:
        p = d["plan"]
        plan = TransferPlan(sizes=tuple(p["sizes"]), testcase=p["testcase"], think_ms=p["think_ms"], seed=p["seed"],
                            tcp_flows=p.get("tcp_flows", 0), tcp_cc=p.get("tcp_cc", "cubic"),
                            quic_flows=p.get("quic_flows", 1))
        return cls(d["nodeid"], d["stack"], d["cc"], Schedule.from_json(d["schedule"]), plan, d["timeout_s"])


class Inconclusive(Exception):
    """The run cannot decide the property (e.g. an endpoint saturated a CPU core);
    the plugin turns it into a skip with the reason, never a CC failure."""


@dataclass
class Observation:
    """What one example produced; heavier views are read on first use."""

    example: Example
    target: Target
    result: TransferResult
    out_dir: Path

    @cached_property
    def ground_truth(self) -> GroundTruth:
        return read_log(self.out_dir / "link.ndjson")

    @cached_property
    def sender(self):
        """The data sender's (server's) normalised trace of the transfer connection."""
        from harness.observe.qlog import read_run

        traces = read_run(self.out_dir, self.target.stack.name).get("server", [])
        if not traces:
            raise Inconclusive(f"{self.target.stack.name} left no readable server qlog in {self.out_dir}")
        # The transfer is the connection that sent the most packets.
        from harness.observe.events import PacketSent

        return max(traces, key=lambda t: len(t.of(PacketSent)))


    @cached_property
    def wire(self):
        """The server side's capture, decrypted with the server's key log: what the
        data sender put on the wire and what reached it, for any stack."""
        from harness.observe.wire import WireError, read_wire

        pcap, keys = self.out_dir / "pcap" / "server.pcap", self.out_dir / "server" / "keys.log"
        if not pcap.exists() or not keys.exists():
            raise Inconclusive(f"{self.target.id}: no server capture or key log in {self.out_dir}")
        view = read_wire(pcap, [keys], self.ground_truth.header["start_unix_ns"])
        if not view.connections:
            raise Inconclusive(f"{self.target.id}: no QUIC connection in {pcap}")
        try:
            view.check()
        except WireError as e:
            raise Inconclusive(f"{self.target.id}: the wire view is incomplete: {e}") from None
        return view


def _slug(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)[-120:]


class Runner:
    """Runs examples under an artifacts root; remembers each test's last failure."""

    def __init__(self, artifacts: Path, keep_passing: bool = False):
        self.artifacts = artifacts.resolve()
        self.keep_passing = keep_passing
        #: Each test's last failure: its example directories, more than one under
        #: together(); the last is the one the report and replay name.
        self.kept: dict[str, list[Path]] = {}
        self._counter = 0
        #: Under together(): the runs made so far, held until the verdict.
        self._held: list[Path] | None = None

    def _next_dir(self, nodeid: str) -> Path:
        # Never reuse a directory: an earlier run's artifacts, or another run's
        # sharing this artifacts root right now, stay as they are.
        while True:
            self._counter += 1
            d = self.artifacts / _slug(nodeid) / f"example-{self._counter:04d}"
            try:
                d.mkdir(parents=True)
                return d
            except FileExistsError:
                continue

    def _fail(self, nodeid: str, dirs: list[Path], e: BaseException) -> None:
        verdict = "".join(traceback.format_exception_only(type(e), e))
        for d in dirs:
            (d / "verdict.txt").write_text(verdict)
        # Shrinking fails many examples; keep only the latest, which is the
        # minimal one Hypothesis replays last.
        for d in self.kept.get(nodeid, []):
            if d not in dirs:
                _discard(d)
        self.kept[nodeid] = list(dirs)

    def _passed(self, dirs: list[Path]) -> None:
        if not self.keep_passing:
            for d in dirs:
                _discard(d)

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """The runs inside form one verdict: a passing run's artifacts are held
        until the block ends, and kept with the others if the verdict fails."""
        outer, held = self._held, []
        self._held = held
        try:
            yield
        except (pytest.skip.Exception, UnsatisfiedAssumption):
            self._passed(held)
            raise
        except BaseException as e:
            if held:
                self._fail(_nodeid(), held, e)
            raise
        else:
            self._passed(held)
        finally:
            self._held = outer

    @contextlib.contextmanager
    def run(self, target: Target, schedule: Schedule, plan: TransferPlan, timeout_s: float = 60.0) -> Iterator[Observation]:
        nodeid = _nodeid()
        example = Example(nodeid, target.stack.name, target.cc.name, schedule, plan, timeout_s)
        out = self._next_dir(nodeid)
        from harness.docker_backend import provenance

        record = example.to_json() | {"run": provenance(target.stack)}
        (out / "example.json").write_text(json.dumps(record, indent=2) + "\n")
        try:
            obs = run_example(example, target, out)
        except Inconclusive as e:
            # Hypothesis lets pytest's skip through: the whole test is skipped.
            _discard(out)
            pytest.skip(f"inconclusive: {e}")
        try:
            yield obs
        except Inconclusive as e:
            _discard(out)
            pytest.skip(f"inconclusive: {e}")
        except (pytest.skip.Exception, UnsatisfiedAssumption):
            # Not a failure: a skip, or an example the property's assume() rejects.
            _discard(out)
            raise
        except BaseException as e:
            if self._held is not None:
                self._held.append(out)  # together() keeps it with the runs before it
            else:
                self._fail(nodeid, [out], e)
            raise
        else:
            if self._held is not None:
                self._held.append(out)
            else:
                self._passed([out])


def _discard(example_dir: Path) -> None:
    """Removes an example's directory, and its test's directory once it is empty,
    so a passing suite leaves no empty directories behind."""
    shutil.rmtree(example_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        example_dir.parent.rmdir()


def _nodeid() -> str:
    return os.environ.get("PYTEST_CURRENT_TEST", "manual").rsplit(" (", 1)[0]


def run_example(example: Example, target: Target, out: Path) -> Observation:
    """Runs the transfer of `example` into `out`; a transfer that is unsupported is
    Inconclusive, one that fails is returned for the property to judge."""
    opts = EndpointOptions(cc=None if target.cc.name == target.stack.default_cc else target.cc.name,
                           timeout_s=example.timeout_s)
    if os.environ.get("LONGLOOK_MODE") == "virtual":
        return _run_virtual(example, target, out, opts)
    # The backend in force ($LONGLOOK_BACKEND: local namespaces or Docker containers).
    from harness.docker_backend import open_testbed

    with open_testbed(example.schedule, out, target.stack) as bed:
        result = bed.transfer(target.stack, example.plan, opts)
    if result.unsupported:
        raise Inconclusive(f"{target.id}: {result.reason}")
    return Observation(example, target, result, out)


def _run_virtual(example: Example, target: Target, out: Path, opts: EndpointOptions) -> Observation:
    """run_example in virtual time (docs/virtual-time.md); a stack or plan that
    needs real time is a skip saying so, never a silent fallback."""
    from harness import virtual

    try:
        result = virtual.transfer(example.schedule, out, target.stack, example.plan, opts)
    except virtual.RealTimeOnly as e:
        _discard(out)
        pytest.skip(f"real time only: {e}")
    if result.unsupported:
        raise Inconclusive(f"{target.id}: {result.reason}")
    return Observation(example, target, result, out)


def replay_command(example_dir: Path) -> str:
    return f"longlook replay {example_dir}"
