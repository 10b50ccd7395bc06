"""One property example end to end: run it (harness.run), observe what it left
(harness.observe), let the property judge it, keep the artifacts of failures and make
every failure replayable.

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
the run's artifacts (schedule, ground truth, pcap, qlog, key logs, result.json) and,
when it failed, verdict.txt. Passing examples' directories are removed unless asked
to keep.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import traceback
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest
from hypothesis.errors import UnsatisfiedAssumption

from harness.observe.groundtruth import GroundTruth, read_log
from harness.run import Example, Inconclusive, RealTimeOnly, Target, mode_for, provenance, run_example
from harness.virtual.recheck import check_placed
from harness.schedule import Flow, Schedule, TransferPlan
from harness.verdict.analysis import transfer_records, transfer_share
from harness.verdict.blackhole import dark_tail
from harness.verdict.deviation import check
from harness.verdict.outcomes import Ledger, NotExercised, undecided

if TYPE_CHECKING:  # the run's result is data here: the verdict never drives a testbed
    from harness.testbed.topology import TransferResult


class HarnessError(RuntimeError):
    """The harness, not the stack, went wrong (e.g. the run's transfer flow is not in
    its ground truth): an error of the suite, never a verdict on the stack."""


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

    def completed(self) -> None:
        """Fails the example with the deviation "transfer-failed" unless the transfer
        completed: a property judges a completed run, and a finding about something
        else never absorbs a stall. A run whose link dropped everything, either way,
        from some point to its end is inconclusive instead (blackhole.dark_tail)."""
        if not self.result.ok and self.result.transfer is not None:
            flow = self.result.transfer
            both = transfer_records(self.ground_truth.records, flow, "s2c") + \
                transfer_records(self.ground_truth.records, flow, "c2s")
            dark = dark_tail(both)
            if dark:  # the link cut the endpoints off for good: no stack could finish
                raise Inconclusive(
                    f"{self.target.id}: the link dropped all {dark[1]} datagrams of the transfer, either way, "
                    f"from {dark[0] / 1e6:.2f} s to the end of the run ({self.result.reason})")
        check(self.result.ok, "transfer-failed", f"{self.target.id}: transfer failed: {self.result.reason}",
              reason=str(self.result.reason))

    @property
    def transfer_flow(self) -> Flow:
        """The flow under test, as the run recorded it (never a testbed constant)."""
        if self.result.transfer is None:
            raise HarnessError(f"{self.target.id}: the run in {self.out_dir} recorded no transfer flow")
        return self.result.transfer

    def transfer_records(self, direction: str = "s2c"):
        """The ground truth's records of the transfer in `direction`. Finding none is
        an error of the harness (a wrong flow, or an empty log), never a verdict."""
        records = transfer_records(self.ground_truth.records, self.transfer_flow, direction)
        if not records:
            flow = self.transfer_flow
            raise HarnessError(
                f"{self.target.id}: the transfer's flow was not found in {self.out_dir / 'link.ndjson'}: "
                f"expected {flow.proto} {flow.addr}:{flow.port} ({direction})")
        return records

    def transfer_share(self, direction: str = "s2c") -> tuple[float, float, float]:
        """analysis.transfer_share of the run's transfer flow, which must be in the ground truth."""
        self.transfer_records(direction)
        return transfer_share(self.ground_truth.records, self.transfer_flow, direction)

    @cached_property
    def sender(self):
        """The data sender's (server's) normalised trace of the transfer connection."""
        return self._trace("server", self.target.stack)

    def _trace(self, side: str, stack):
        """`side`'s normalised trace, read in `stack`'s dialect, of the connection that
        sent the most packets (the transfer)."""
        from harness.observe.events import PacketSent
        from harness.observe.qlog import read_run

        if not stack.honours.get("qlog") and stack.transport == "udp":
            return self._wire_only_trace(side, stack)
        traces = read_run(self.out_dir, stack.name).get(side, [])
        if not traces:
            raise Inconclusive(f"{stack.name} left no readable {side} qlog in {self.out_dir}")
        return max(traces, key=lambda t: len(t.of(PacketSent)))

    def _wire_only_trace(self, side: str, stack):
        """The trace of a QUIC stack that writes no log (a production server): its
        sends, the ACKs that reached it and losses presumed by RFC 9002's thresholds,
        from its side's decrypted capture and marked derived. The wire's window and
        flight estimates are left out: a lower bound judged as the stack's own window
        would fail the rules that bound it from below (kMinimumWindow, β) on evidence
        that cannot show it; the report plots them instead (report/outputs.py). Its
        dialect logs no capability, so a property that needs the stack's own account
        skips before running, and one that finds no window says it was not exercised."""
        from harness.observe.events import Metrics
        from harness.observe.join import wire_trace
        from harness.observe.join import busiest_connection

        view = self._wire(side)
        conn = busiest_connection(view, "s2c" if side == "server" else "c2s")
        trace = wire_trace(view, conn or 0, side, stack.name, losses=True)
        events = []
        for e in trace.events:
            if isinstance(e, Metrics):
                e = replace(e, congestion_window=None, bytes_in_flight=None)
                if all(getattr(e, f) is None for f in ("smoothed_rtt_us", "min_rtt_us", "latest_rtt_us",
                                                       "rtt_variance_us", "pacing_rate_bps", "pto_count")):
                    continue
            events.append(e)
        return replace(trace, events=events, derived=frozenset({"ack_frames", "packet_lost"}),
                       notes=[*trace.notes, f"{stack.name} writes no log: sends, ACKs and presumed losses from the "
                                            "capture; no window or flight (the wire gives only a lower bound)"])

    @cached_property
    def sender_with_wire(self):
        """The sender's trace, with what its stack's log cannot carry (ACK frames,
        declared losses: its dialect's LOGS) derived from the capture and marked so
        (harness/observe/derive.py)."""
        from harness.observe import dialects
        from harness.observe.derive import DERIVABLE, DeriveError, fill_from_wire

        stack = self.target.stack
        dialect = dialects.of_stack(stack.name, bool(stack.honours.get("qlog")))
        lacking = {c for c in DERIVABLE if not dialect.logs(c)}
        if not lacking:
            return self.sender
        try:
            return fill_from_wire(self.sender, self.wire, lacking)
        except DeriveError as e:
            raise Inconclusive(f"{self.target.id}: {e}") from None

    @cached_property
    def client(self):
        """The client's normalised trace of the transfer connection (in a download, the
        data receiver: the same stack unless the target has a peer)."""
        return self._trace("client", self.target.peer or self.target.stack)

    @cached_property
    def client_wire(self):
        """The client side's capture, decrypted with the client's key log: what the
        client put on the wire (before the link's losses) and what reached it."""
        return self._wire("client")

    @cached_property
    def wire(self):
        """The server side's capture, decrypted with the server's key log: what the
        data sender put on the wire and what reached it, for any stack."""
        return self._wire("server")

    def _wire(self, side: str):
        from harness.observe.wire import WireError, read_wire

        from harness.observe.join import keylog_of

        pcap, keys = self.out_dir / "pcap" / f"{side}.pcap", keylog_of(self.out_dir, side)
        if not pcap.exists() or keys is None:
            raise Inconclusive(f"{self.target.id}: no {side} capture or key log in {self.out_dir}")
        flow = self.transfer_flow
        # An upload's QUIC server listens on the link's client side: directions are
        # still the link's (s2c the data), so name that side's address too.
        server_side = self.ground_truth.server_side_addrs() if flow.listener == "client" else None
        view = read_wire(pcap, [keys], self.ground_truth.header["start_unix_ns"],
                         server_addrs={flow.addr}, server_side_addrs=server_side)
        if not view.connections:
            raise Inconclusive(f"{self.target.id}: no QUIC connection in {pcap}")
        try:
            view.check()
        except WireError as e:
            raise Inconclusive(f"{self.target.id}: the {side}'s wire view is incomplete: {e}") from None
        return view


def _slug(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)[-120:]


class Runner:
    """Runs examples under an artifacts root; remembers each test's last failure and
    what its examples came to (outcomes.Ledger: judged, inconclusive, not exercised)."""

    def __init__(self, artifacts: Path, keep_passing: bool = False):
        self.artifacts = artifacts.resolve()
        self.keep_passing = keep_passing
        #: Each test's last failure: its example directories, more than one under
        #: together(); the last is the one the report and replay name.
        self.kept: dict[str, list[Path]] = {}
        self._counter = 0
        #: Under together(): the runs made so far, held until the verdict.
        self._held: list[Path] | None = None
        #: Each test's examples: how many were judged, and why the others were not.
        self.ledgers: dict[str, Ledger] = {}

    def ledger(self, nodeid: str | None = None) -> Ledger:
        return self.ledgers.setdefault(nodeid or _nodeid(), Ledger())

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
        # minimal one Hypothesis replays last (--keep-passing keeps every example).
        for d in self.kept.get(nodeid, []):
            if d not in dirs and not self.keep_passing:
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
        # The runs inside are one verdict: one example judged, or none if any was not.
        ledger = self.ledger()
        judged_before = ledger.judged
        try:
            yield
        except (pytest.skip.Exception, UnsatisfiedAssumption):
            ledger.judged = judged_before
            self._passed(held)
            raise
        except BaseException as e:
            if not getattr(e, "_longlook_recorded", False):  # run() records its own
                ledger.record_failure(e)
            if held:
                self._fail(_nodeid(), held, e)
            raise
        else:
            ledger.judged = judged_before + 1
            ledger.streak = 0
            self._passed(held)
        finally:
            self._held = outer

    @contextlib.contextmanager
    def run(self, target: Target, schedule: Schedule, plan: TransferPlan, timeout_s: float = 60.0) -> Iterator[Observation]:
        nodeid = _nodeid()
        # The target's direction is the run's: a property's plan says what moves, not which way.
        plan = replace(plan, direction=target.direction)
        try:
            mode = mode_for(target, plan)
        except RealTimeOnly as e:  # --mode virtual asked for what only real time runs
            pytest.skip(f"real time only: {e}")
        check_placed(mode)
        # Labels (aioquic@1.5.0), so that a replay runs the same releases.
        example = Example(nodeid, target.stack.label, target.cc.name, schedule, plan, timeout_s, mode,
                          target.peer.label if target.peer else None)
        self.ledger(nodeid).modes.add(mode)
        out = self._next_dir(nodeid)
        record = example.to_json() | {"run": provenance(target.stack)}
        (out / "example.json").write_text(json.dumps(record, indent=2) + "\n")
        try:
            obs = Observation(example, target, run_example(example, target, out), out)
        except Inconclusive as e:
            # Not a skip, which would end the whole property (a failure already
            # found included): this example is rejected, and recorded.
            _discard(out)
            raise undecided(self.ledger(nodeid), str(e)) from None
        try:
            yield obs
        except Inconclusive as e:
            _discard(out)
            raise undecided(self.ledger(nodeid), str(e)) from None
        except NotExercised as e:
            _discard(out)
            self.ledger(nodeid).not_exercised.append(str(e.args[0]) if e.args else "trigger never happened")
            raise
        except (pytest.skip.Exception, UnsatisfiedAssumption):
            # Not a failure: a skip decided before the run, or an example the
            # property's assume() rejects.
            _discard(out)
            raise
        except BaseException as e:
            self.ledger(nodeid).record_failure(e)
            try:
                e._longlook_recorded = True
            except AttributeError:  # an exception type with __slots__
                pass
            if self._held is not None:
                self._held.append(out)  # together() keeps it with the runs before it
            else:
                self._fail(nodeid, [out], e)
            raise
        else:
            self.ledger(nodeid).judged += 1
            self.ledger(nodeid).streak = 0
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
