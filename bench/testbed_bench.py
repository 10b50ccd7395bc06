"""Testbed benchmark (issue 3): what each stack's endpoint achieves through a clean
emulated link, what qlog costs it, and how long a testbed takes to set up.

Per built stack (aioquic, picoquic, quic-go, quiche, quinn, tcp), a 20 MB transfer
over a clean 100 Mbit/s / 20 ms RTT link and a clean 1 Gbit/s / 2 ms RTT link (queue
one BDP, at least 64 KB), each with qlog on and off: goodput, CPU time of client and
server, and whether a side saturated a core (then the goodput is endpoint-bound, not
link-bound). Plus the median time to enter and leave a `Testbed` with no transfer.

    .venv/bin/python bench/testbed_bench.py [--quick] [--only quinn,tcp] [--keep]

Prints one JSON line on stdout; progress goes to stderr. Needs root and `make setup`.
`--quick`: 2 MB transfers, 100 Mbit/s link only, 3 set-up/tear-down repetitions.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable as a plain script

from harness import endpoints  # noqa: E402
from harness.cli import link_schedule  # noqa: E402
from harness.testbed.topology import EndpointOptions, Testbed, TransferPlan, interrupts_as_exceptions  # noqa: E402

LINKS = {"100mbit_20ms": (100_000_000, 20_000), "1gbit_2ms": (1_000_000_000, 2_000)}
MIN_QUEUE = 64 * 1024
#: A side busy this fraction of one core during the data phase is the bottleneck.
SATURATED = 0.9
SETUP_GOAL_S = 1.0
#: Sampling period of the endpoints' CPU counters: fine enough to place the data
#: phase's boundaries to a few ms, coarse enough to cost well under 1% CPU.
SAMPLE_S = 0.01


def log(msg: str) -> None:
    print(f"[testbed-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def proc_cpu_s(pid: int) -> float | None:
    """On-CPU time of a live process, all threads, to the nanosecond; None once reaped.

    The kernel's per-process CPU clock, whose id clock_getcpuclockid(3) builds as
    ((~pid) << 3) | CPUCLOCK_SCHED (2); Python wraps only the per-thread variant.
    /proc/<pid>/stat would do too, but in 10 ms ticks, too coarse for a 0.2 s transfer.
    """
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        return None


class Meter:
    """CPU accounting for one Testbed's two endpoints.

    Total CPU per side comes from RUSAGE_CHILDREN deltas around the wait that reaps
    the endpoint. That counts the whole process tree (every thread, plus any
    descendant its parents reaped), includes the work done at exit (qlog flushes,
    which is part of what qlog costs), and needs no wrapper around the endpoint.
    /usr/bin/time would lose the server's figure: the harness stops the server with
    SIGTERM to its whole process group, and that also kills `time` before it prints.
    The delta is exact here because this process is single-threaded apart from the
    samplers, and nothing else reaps a child while an endpoint is being waited for.
    The emulator is reaped only when the Testbed exits.

    The busy fraction needs CPU at the data phase's boundaries (the client's
    request_start and request_done, CLOCK_MONOTONIC like time.monotonic), and the
    rusage totals cannot give that. So a thread samples the process's CPU clock
    every SAMPLE_S, and the bench interpolates between samples. Every endpoint `run`
    execs its program (`ip netns exec` execs too), so the pid is the endpoint itself.
    """

    def __init__(self, bed: Testbed):
        self.cpu_s: dict[str, float] = {}
        self.reaped_at: dict[str, float] = {}
        self.samples: dict[str, list[tuple[float, float]]] = {}
        self._threads: list[threading.Thread] = []
        start = bed.start_endpoint

        def start_and_watch(stack, role, env, workdir):
            proc = start(stack, role, env, workdir)
            self._watch(role, proc)
            return proc

        bed.start_endpoint = start_and_watch  # instance attribute: transfer() calls it

    def _watch(self, role: str, proc) -> None:
        samples = self.samples.setdefault(role, [])

        def sample() -> None:
            while (cpu := proc_cpu_s(proc.pid)) is not None and proc.returncode is None:
                samples.append((time.monotonic(), cpu))
                time.sleep(SAMPLE_S)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        self._threads.append(thread)
        wait = proc.wait

        def wait_and_account(timeout=None):
            before = children_cpu_s()
            try:
                return wait(timeout)
            finally:
                # Only the call that reaps it (returncode set) carries its CPU.
                if proc.returncode is not None and role not in self.cpu_s:
                    self.cpu_s[role] = children_cpu_s() - before
                    self.reaped_at[role] = time.monotonic()

        proc.wait = wait_and_account

    def busy(self, role: str, t0: float, t1: float) -> float | None:
        """Fraction of one core `role` used between t0 and t1 (monotonic seconds)."""
        for thread in self._threads:
            thread.join(1.0)
        s = list(self.samples.get(role, []))
        if role in self.cpu_s:
            # The exact total at reap closes the series, since a client that exits
            # right after request_done may leave no sample past it.
            s.append((self.reaped_at[role], self.cpu_s[role]))
        s.sort()
        if t1 <= t0 or not s or s[0][0] > t0 or s[-1][0] < t1:
            return None
        return (_interpolate(s, t1) - _interpolate(s, t0)) / (t1 - t0)


def _interpolate(samples: list[tuple[float, float]], t: float) -> float:
    for (ta, ca), (tb, cb) in zip(samples, samples[1:]):
        if ta <= t <= tb:
            return ca + (cb - ca) * (t - ta) / (tb - ta) if tb > ta else cb
    return samples[-1][1]


def data_phase(applog: Path) -> tuple[float, float] | None:
    """First request_start and last request_done of the client, monotonic seconds."""
    times: dict[str, list[float]] = {"request_start": [], "request_done": []}
    for line in applog.read_text(errors="replace").splitlines() if applog.exists() else []:
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if ev.get("event") in times:
            times[ev["event"]].append(ev["t_us"] / 1e6)
    starts, dones = times.values()
    return (min(starts), max(dones)) if starts and dones else None


def schedule_for(link: str):
    rate, rtt_us = LINKS[link]
    queue = max(rate * rtt_us // 8_000_000, MIN_QUEUE)
    return link_schedule(rate, rtt_us, 0.0, queue, seed=1), queue


def qlog_files(out: Path) -> tuple[int, int]:
    files = [p for role in ("client", "server") for p in (out / role / "qlog").rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def one_transfer(stack, link: str, size: int, qlog: bool, out: Path) -> dict:
    schedule, _ = schedule_for(link)
    # Testbed defaults (pcap on, emulator SCHED_FIFO): the testbed as the properties run it.
    with Testbed(schedule, out) as bed:
        meter = Meter(bed)
        result = bed.transfer(stack, TransferPlan(sizes=(size,)), EndpointOptions(qlog=qlog, timeout_s=90.0))
    files, qbytes = qlog_files(out)
    row = {"ok": result.ok, "goodput_mbps": round(result.goodput_bps / 1e6, 2),
           "duration_s": round(result.duration_s, 3), "qlog_files": files, "qlog_bytes": qbytes}
    if not result.ok:
        row["reason"] = result.reason
    phase = data_phase(out / "client" / "app.ndjson")
    for role in ("client", "server"):
        cpu = meter.cpu_s.get(role)
        row[f"cpu_{role}_s"] = None if cpu is None else round(cpu, 3)
        busy = meter.busy(role, *phase) if phase else None
        row[f"busy_{role}"] = None if busy is None else round(busy, 3)
    busiest = max((b for b in (row["busy_client"], row["busy_server"]) if b is not None), default=None)
    row["saturated"] = None if busiest is None else busiest >= SATURATED
    return row


def setup_teardown(reps: int, tmp: Path) -> dict:
    schedule, _ = schedule_for("100mbit_20ms")
    times = []
    for i in range(reps):
        t0 = time.monotonic()
        with Testbed(schedule, tmp / f"setup-{i}"):
            pass
        times.append(time.monotonic() - t0)
    median = statistics.median(times)
    return {"median_s": round(median, 3), "runs_s": [round(t, 3) for t in times], "goal_s": SETUP_GOAL_S,
            "met": median <= SETUP_GOAL_S}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="2 MB transfers, 100 Mbit/s link only, 3 set-up repetitions")
    p.add_argument("--only", help=f"comma-separated stacks (default: every built one of {','.join(endpoints.STACKS)})")
    p.add_argument("--keep", action="store_true", help="keep every run's artifacts and print where")
    a = p.parse_args(argv)
    wanted = a.only.split(",") if a.only else list(endpoints.STACKS)
    unknown = [s for s in wanted if s not in endpoints.STACKS]
    if unknown:
        p.error(f"--only: unknown stack(s) {','.join(unknown)}; known: {','.join(endpoints.STACKS)}")
    size = 2_000_000 if a.quick else 20_000_000
    links = ["100mbit_20ms"] if a.quick else list(LINKS)
    reps = 3 if a.quick else 10
    began, load_start = time.monotonic(), os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="ll-testbed-bench-"))
    report: dict = {"bench": "testbed", "command": shlex.join([Path(sys.executable).name, *sys.argv]),
                    "quick": a.quick, "transfer_bytes": size,
                    "links": {k: {"rate_bps": LINKS[k][0], "rtt_ms": LINKS[k][1] / 1000,
                                  "queue_bytes": schedule_for(k)[1]} for k in links},
                    "saturated_at": SATURATED, "stacks": {}, "skipped": {}, "qlog_off_leaves_no_qlog": {}}
    try:
        with interrupts_as_exceptions():
            log(f"set-up/tear-down x{reps}")
            report["setup_teardown"] = setup_teardown(reps, tmp)
            for name in wanted:
                stack = endpoints.load(name)
                if not stack.is_built():
                    report["skipped"][name] = "not built (make setup)"
                    continue
                entry = report["stacks"][name] = {"version": stack.version, "cc": stack.default_cc}
                clean = True
                for link in links:
                    entry[link] = {}
                    # Alternate which goes first, so a drift in host load does not
                    # always land on the same side of the qlog comparison.
                    flip = (wanted.index(name) + links.index(link)) % 2
                    for qlog in (False, True) if flip else (True, False):
                        key = "qlog_on" if qlog else "qlog_off"
                        log(f"{name} {link} {key}")
                        row = entry[link][key] = one_transfer(stack, link, size, qlog, tmp / name / link / key)
                        log(f"  {row['goodput_mbps']} Mbit/s, cpu c/s {row['cpu_client_s']}/{row['cpu_server_s']} s,"
                            f" busy c/s {row['busy_client']}/{row['busy_server']}, qlog files {row['qlog_files']}"
                            + ("" if row["ok"] else f", FAILED: {row['reason']}"))
                        if not qlog:
                            clean = clean and row["qlog_files"] == 0
                    if not a.keep:
                        shutil.rmtree(tmp / name, ignore_errors=True)  # 20 MB objects add up
                report["qlog_off_leaves_no_qlog"][name] = clean
    except KeyboardInterrupt:
        log("interrupted; testbeds were cleaned up")
        return 130
    finally:
        if a.keep:
            log(f"artifacts kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    report["host"] = {"cpus": os.cpu_count(), "kernel": os.uname().release,
                      "loadavg_start": [round(x, 2) for x in load_start],
                      "loadavg_end": [round(x, 2) for x in os.getloadavg()]}
    report["wall_s"] = round(time.monotonic() - began, 1)
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
