#!/usr/bin/env python3
"""Benchmark of longlook-link (the link emulator) against a veth pair and ns-3.

Prints ONE JSON line on stdout; progress goes to stderr. Every part runs in a
fresh pair of network namespaces (198.18.0.1 client, 198.19.0.1 server), in one
invocation, so the ratios between parts are comparable. Parts (--only):

  veth       plain veth pair, one iperf3 TCP CUBIC flow            -> veth_mbps
  plain      same through longlook-link, unimpaired schedule       -> plain_mbps
  impaired   1 Gbit/s, 10 ms one-way each way, queue 2.5 MB (BDP)  -> impaired_mbps, impaired_cpu_pct
  lossy      impaired + iid loss 0.001 c2s                         -> lossy_cpu_pct
  delay      20 ms one-way each way, 1 Gbit/s, 100 Mbit/s UDP bulk,
             UDP echo probes (bench/udp_probe.c)                   -> delay_err_p50_us/p99_us
  rss        1 Gbit/s, 100 ms one-way, queue 12.5 MB, TCP flow     -> max_rss_mb (VmHWM)
  ns3        bench/ns3_link.cc with the impaired settings          -> ns3_mbps, ns3_cpu_pct
  ns3_delay  bench/ns3_link.cc with the delay settings             -> ns3_delay_err_p50_us/p99_us

CPU% is utime+stime of the router process over the transfer; 100% = one core.
The ground-truth log is on in every emulator run. Delay error = RTT measured by
the probe (kernel receive timestamps, minus the echo server's own turnaround)
minus the configured 40 ms. See BENCHMARKS.md for targets and results.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib as bl  # noqa: E402

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
BUILD = BENCH / "build"
DEFAULT_EMULATOR = REPO / "harness/emulator/target/release/longlook-link"
PARTS = ("veth", "plain", "impaired", "lossy", "delay", "rss", "ns3", "ns3_delay")
GBIT = 1_000_000_000
IPERF_PORT, PROBE_PORT = 5201, 7777


def link(rate=None, delay_us=None, queue=None, loss=None) -> dict:
    d = {"rate_bps": rate, "delay_us": delay_us, "queue_bytes": queue, "loss": {"iid": loss} if loss else None}
    return {k: v for k, v in d.items() if v is not None}


def schedule(c2s: dict, s2c: dict) -> dict:
    phase = {"start_us": 0, **({"c2s": c2s} if c2s else {}), **({"s2c": s2c} if s2c else {})}
    return {"seed": 1, "phases": [phase]}


# Link settings per part. The emulator gets the reverse (ACK) direction shaped the
# same way as the data direction, to match ns-3's symmetric point-to-point link.
IMPAIRED = link(GBIT, 10_000, 2_500_000)
DELAY = link(GBIT, 20_000, 5_000_000)
RSS = link(GBIT, 100_000, 12_500_000)
SCHEDULES = {
    "plain": schedule({}, {}),
    "impaired": schedule(IMPAIRED, IMPAIRED),
    "lossy": schedule(link(GBIT, 10_000, 2_500_000, 0.001), IMPAIRED),
    "delay": schedule(DELAY, DELAY),
    "rss": schedule(RSS, RSS),
}


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path):
        self.a, self.tmp = args, tmp
        self.out: dict = {"router_lateness": {}, "skipped": {}, "busy_before_pct": {}}
        q = args.quick
        self.secs = 3 if q else 10          # iperf3 -t for the TCP parts
        self.omit = 1                       # iperf3 -O: slow start is not counted
        self.probes = (1000, 2000) if q else (2500, 4000)  # count, interval_us
        self.cc_seen: set[str] = set()
        self.impaired: dict = {}

    # ---------- builds ----------
    def build(self) -> None:
        BUILD.mkdir(exist_ok=True)
        probe, ns3 = BUILD / "udp_probe", BUILD / "ns3_link"
        if self._stale(probe, BENCH / "udp_probe.c"):
            bl.log("building udp_probe")
            bl.run(["cc", "-O2", "-Wall", "-o", str(probe), str(BENCH / "udp_probe.c")])
        if {"ns3", "ns3_delay"} & self.parts and self._stale(ns3, BENCH / "ns3_link.cc"):
            bl.log("building ns3_link (about 30 s)")
            flags = bl.run(["pkg-config", "--cflags", "--libs", "ns3-fd-net-device", "ns3-point-to-point",
                            "ns3-internet", "ns3-traffic-control", "ns3-network", "ns3-core"]).split()
            bl.run(["g++", "-O2", "-std=c++17", "-o", str(ns3), str(BENCH / "ns3_link.cc"), *flags], timeout=300)

    def prio(self, argv: list[str]) -> list[str]:
        """With --nice N, every benchmark process (router, ns-3, iperf3, probes) runs at nice N."""
        return ["nice", "-n", str(self.a.nice), *argv] if self.a.nice else argv

    @staticmethod
    def _stale(binary: Path, source: Path) -> bool:
        return not binary.exists() or binary.stat().st_mtime < source.stat().st_mtime

    # ---------- links ----------
    def start_emulator(self, lab: bl.Lab, name: str) -> bl.Proc:
        sched = self.tmp / f"{name}.json"
        sched.write_text(json.dumps(SCHEDULES[name]))
        argv = [str(self.a.emulator), "run", "--schedule", str(sched), "--client-netns", lab.client,
                "--server-netns", lab.server, "--log", str(self.tmp / f"{name}.ndjson")]
        if self.a.fifo:
            argv.append("--fifo")
        proc = lab.start(self.prio(argv), pipe_stdout=True)
        ready = json.loads(proc.wait_line(30))
        if not ready.get("ready"):
            raise RuntimeError(f"longlook-link not ready: {ready}")
        lab.addresses(ready.get("client_dev", "ll0"))
        return proc

    def stop_emulator(self, proc: bl.Proc, name: str) -> dict:
        """SIGTERM, then return the summary (last line of the ground-truth log)."""
        proc.stop(grace=60)
        if proc.p.returncode != 0:
            bl.log(f"longlook-link exited {proc.p.returncode}")
        logf = self.tmp / f"{name}.ndjson"
        with open(logf, "rb") as f:
            f.seek(max(0, logf.stat().st_size - 1_000_000))
            lines = f.read().splitlines()
        summary = json.loads(lines[-1]).get("summary", {}) if lines else {}
        bl.log(f"{name}: log {logf.stat().st_size / 1e6:.0f} MB")
        return summary

    def start_ns3(self, lab: bl.Lab, settings: dict) -> bl.Proc:
        argv = [str(BUILD / "ns3_link"), f"--clientNetns={lab.client}", f"--serverNetns={lab.server}",
                f"--rate={settings['rate_bps']}bps", f"--delayUs={settings['delay_us']}",
                f"--queueBytes={settings['queue_bytes']}", "--maxSeconds=300"]
        proc = lab.start(self.prio(argv), pipe_stdout=True)
        ready = json.loads(proc.wait_line(30))
        assert ready.get("ready"), ready
        lab.addresses("lt0", via_client="198.18.0.2", via_server="198.19.0.2")
        return proc

    def veth(self, lab: bl.Lab) -> None:
        bl.run(["ip", "link", "add", "vc", "netns", lab.client, "type", "veth", "peer", "name", "vs",
                "netns", lab.server])
        for ns, dev in ((lab.client, "vc"), (lab.server, "vs")):
            bl.run(bl.in_ns(ns, ["ip", "link", "set", dev, "name", "ll0"]))
        lab.addresses("ll0")

    # ---------- traffic ----------
    def iperf_server(self, lab: bl.Lab) -> None:
        lab.start(self.prio(bl.in_ns(lab.server, ["iperf3", "-s", "-1", "-B", bl.SERVER_IP, "-p", str(IPERF_PORT),
                                        "--idle-timeout", "120"])))
        for _ in range(100):
            if bl.run(bl.in_ns(lab.server, ["ss", "-Hltn", f"sport = :{IPERF_PORT}"])).strip():
                return
            time.sleep(0.05)
        raise RuntimeError("iperf3 server did not start")

    def tcp_flow(self, lab: bl.Lab, router_pid: int | None, profile: str | None = None) -> dict:
        """One iperf3 TCP CUBIC flow client -> server; router CPU% over it (and a perf profile)."""
        seconds = self.secs
        self.iperf_server(lab)
        perf_data = self.tmp / f"perf-{profile}.data"
        perf = lab.start(["perf", "record", "-e", "cpu-clock", "-F", "999", "-g", "-p", str(router_pid),
                          "-o", str(perf_data)]) if profile and router_pid else None
        cpu0, t0 = (bl.cpu_seconds(router_pid) if router_pid else 0.0), time.monotonic()
        out = bl.iperf3_json(bl.run(self.prio(bl.in_ns(lab.client, [
            "iperf3", "-c", bl.SERVER_IP, "-p", str(IPERF_PORT), "-t", str(seconds), "-O", str(self.omit),
            "-C", "cubic", "-J"])), check=False, timeout=seconds + self.omit + 60))
        wall = time.monotonic() - t0
        cpu = 100 * (bl.cpu_seconds(router_pid) - cpu0) / wall if router_pid else None
        if perf:
            perf.stop(grace=30)
            report = BUILD / f"perf-{profile}.txt"
            report.write_text("".join(
                bl.run(["perf", "report", "-i", str(perf_data), "--stdio", "--no-children", "--sort", sort,
                        "--percent-limit", "0.5", "-g", "none"], timeout=300) for sort in ("dso", "dso,symbol")))
            self.out["perf_report"] = str(report.relative_to(REPO))
            bl.log(f"  perf profile of the router: {report}")
        if "error" in out:
            raise RuntimeError(f"iperf3: {out['error']}")
        end = out["end"]
        self.cc_seen.add(end.get("sender_tcp_congestion", "?"))
        res = {"mbps": round(end["sum_received"]["bits_per_second"] / 1e6, 1),
               "retransmits": end["sum_sent"].get("retransmits"),
               "cpu_pct": None if cpu is None else round(cpu, 1)}
        bl.log(f"  {res}")
        return res

    def host_jitter(self) -> dict:
        """Baseline: overshoot of 1 ms sleeps on this host right now (2 s, same nice as the router)."""
        p50, p99, p999, mx = map(float, bl.run(self.prio([str(BUILD / "udp_probe"), "jitter", "2000"])).split())
        return {"p50_us": p50, "p99_us": p99, "p999_us": p999, "max_us": mx}

    def probe_run(self, lab: bl.Lab, router_pid: int) -> dict:
        """UDP echo probes at a fixed interval while iperf3 sends 100 Mbit/s of UDP c2s."""
        count, interval_us = self.probes
        probe_secs = count * interval_us / 1e6
        host_timer = self.host_jitter()
        self.iperf_server(lab)
        srv = lab.start(self.prio(bl.in_ns(lab.server, [str(BUILD / "udp_probe"), "server", str(PROBE_PORT),
                                                        "300"])), pipe_stdout=True)
        srv.wait_line(10)
        bulk = lab.start(self.prio(bl.in_ns(lab.client, ["iperf3", "-c", bl.SERVER_IP, "-p", str(IPERF_PORT), "-u",
                                               "-b", "100M", "-l", "1400", "-t", str(math.ceil(probe_secs) + 3),
                                               "-J"])), stdout_path=self.tmp / "udp_bulk.json")
        time.sleep(1.0)  # bulk flow running before the first probe
        cpu0, t0 = bl.cpu_seconds(router_pid), time.monotonic()
        text = bl.run(self.prio(bl.in_ns(lab.client, [str(BUILD / "udp_probe"), "client", bl.SERVER_IP,
                                                      str(PROBE_PORT), str(count), str(interval_us)])),
                      timeout=probe_secs + 60)
        cpu = 100 * (bl.cpu_seconds(router_pid) - cpu0) / (time.monotonic() - t0)
        bulk.wait(60)
        udp = bl.iperf3_json((self.tmp / "udp_bulk.json").read_text())
        rows = [tuple(map(int, line.split())) for line in text.splitlines()]
        target_ns = 2 * 20_000 * 1000
        (self.tmp / "probes.txt").write_text(text)  # seq rtt_ns turn_ns sent_unix_ns, kept with --keep
        err = sorted((rtt - turn - target_ns) / 1000 for _, rtt, turn, _ in rows)
        raw = sorted((rtt - target_ns) / 1000 for _, rtt, _, _ in rows)
        if len(err) < 1000:
            bl.log(f"  only {len(err)} probe replies (of {count})")
        if not err:
            raise RuntimeError("no probe replies")
        res = {"err_p50_us": pct(err, 50), "err_p99_us": pct(err, 99), "err_min_us": round(err[0], 1),
               "err_max_us": round(err[-1], 1), "raw_err_p50_us": pct(raw, 50), "raw_err_p99_us": pct(raw, 99),
               "probes": count, "replies": len(err), "cpu_pct": round(cpu, 1), "host_timer_overshoot": host_timer,
               "bulk_mbps": round(udp["end"]["sum"]["bits_per_second"] / 1e6, 1),
               "bulk_lost_pct": round(udp["end"]["sum"].get("lost_percent", 0.0), 3)}
        bl.log(f"  {res}")
        return res

    # ---------- parts ----------
    def part_veth(self):
        with bl.Lab() as lab:
            self.veth(lab)
            self.out["veth_mbps"] = self.tcp_flow(lab, None)["mbps"]

    def _emulated_tcp(self, name: str, profile: bool = False) -> tuple[dict, dict, float]:
        with bl.Lab() as lab:
            emu = self.start_emulator(lab, name)
            res = self.tcp_flow(lab, emu.pid, profile=name if profile else None)
            hwm = bl.vm_hwm_mb(emu.pid)
            summary = self.stop_emulator(emu, name)
        return res, summary, hwm

    def part_plain(self):
        res, summary, _ = self._emulated_tcp("plain")
        self.out.update(plain_mbps=res["mbps"], plain_cpu_pct=res["cpu_pct"])
        self.out["router_lateness"]["plain"] = lateness(summary)
        self._drop_log("plain")

    def part_impaired(self):
        res, summary, _ = self._emulated_tcp("impaired", profile=self.a.perf)
        self.impaired = res
        self.out.update(impaired_mbps=res["mbps"], impaired_cpu_pct=res["cpu_pct"],
                        impaired_retransmits=res["retransmits"])
        self.out["router_lateness"]["impaired"] = lateness(summary)
        self._drop_log("impaired")

    def part_lossy(self):
        res, summary, _ = self._emulated_tcp("lossy")
        # CUBIC at 0.1% loss and 20 ms RTT carries far less than 1 Gbit/s: also CPU% per Gbit/s.
        self.out.update(lossy_cpu_pct=res["cpu_pct"], lossy_mbps=res["mbps"],
                        lossy_cpu_pct_per_gbps=per_gbps(res), impaired_cpu_pct_per_gbps=per_gbps(self.impaired))
        self._drop_log("lossy")

    def part_delay(self):
        with bl.Lab() as lab:
            emu = self.start_emulator(lab, "delay")
            res = self.probe_run(lab, emu.pid)
            summary = self.stop_emulator(emu, "delay")
        self.out.update(delay_err_p50_us=res.pop("err_p50_us"), delay_err_p99_us=res.pop("err_p99_us"),
                        delay_detail=res)
        self.out["router_lateness"]["delay"] = lateness(summary)
        self._drop_log("delay")

    def part_rss(self):
        res, summary, hwm = self._emulated_tcp("rss")
        self.out.update(max_rss_mb=round(hwm, 1), rss_mbps=res["mbps"],
                        rss_max_qbytes_c2s=max_qbytes(self.tmp / "rss.ndjson", "c2s"))
        self._drop_log("rss")

    def part_ns3(self):
        with bl.Lab() as lab:
            ns3 = self.start_ns3(lab, IMPAIRED)
            res = self.tcp_flow(lab, ns3.pid)
            self.out["ns3_max_rss_mb"] = round(bl.vm_hwm_mb(ns3.pid), 1)
            self.out.update(ns3_mbps=res["mbps"], ns3_cpu_pct=res["cpu_pct"], ns3_retransmits=res["retransmits"],
                            ns3_summary=ns3_summary(ns3))

    def part_ns3_delay(self):
        with bl.Lab() as lab:
            ns3 = self.start_ns3(lab, DELAY)
            res = self.probe_run(lab, ns3.pid)
        self.out.update(ns3_delay_err_p50_us=res.pop("err_p50_us"), ns3_delay_err_p99_us=res.pop("err_p99_us"),
                        ns3_delay_detail=res)

    def _drop_log(self, name: str) -> None:
        if not self.a.keep:
            (self.tmp / f"{name}.ndjson").unlink(missing_ok=True)

    def main(self) -> dict:
        self.parts = set(self.a.only.split(",")) if self.a.only else set(PARTS)
        unknown = self.parts - set(PARTS)
        if unknown:
            raise SystemExit(f"unknown part(s) {sorted(unknown)}; choose from {','.join(PARTS)}")
        self.build()
        for part in PARTS:
            if part not in self.parts:
                continue
            needs_emulator = not part.startswith(("ns3", "veth"))
            if needs_emulator and not self.a.emulator.exists():
                self.out["skipped"][part] = f"{self.a.emulator} missing (cargo build --release)"
                bl.log(f"{part}: skipped, no emulator binary")
                continue
            self.out["busy_before_pct"][part] = wait_idle(self.a.wait_idle)
            bl.log(f"{part} ...")
            try:
                getattr(self, "part_" + part)()
            except Exception as e:  # one broken part must not lose the others' numbers
                self.out.setdefault("errors", {})[part] = str(e)[-500:]
                bl.log(f"{part} FAILED: {e}")
        self.out["tcp_cc"] = ",".join(sorted(self.cc_seen)) or None
        return self.out


def ns3_summary(proc: bl.Proc) -> dict | None:
    """Stop ns3_link and return its {"summary": ...} line (queue drops, simulated seconds)."""
    proc.stop()
    for line in proc.rest_stdout().splitlines():
        if line.startswith('{"summary"'):
            return json.loads(line)["summary"]
    return None


def per_gbps(res: dict) -> float | None:
    return round(res["cpu_pct"] / (res["mbps"] / 1000), 1) if res.get("mbps") else None


def pct(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    return round(sorted_values[max(0, math.ceil(p / 100 * len(sorted_values)) - 1)], 1)


def lateness(summary: dict) -> object:
    """The router's lateness histogram from its summary (whatever key holds it)."""
    for key, value in summary.items():
        if "late" in key:
            return value
    return summary or None


def max_qbytes(logf: Path, direction: str) -> int | None:
    """Largest queue occupancy seen by an arriving packet in one direction."""
    pat = re.compile(rb'"dir":\s*"' + direction.encode() + rb'".*?"qbytes":\s*(\d+)')
    best = None
    with open(logf, "rb") as f:
        for line in f:
            m = pat.search(line)
            if m:
                best = max(best or 0, int(m.group(1)))
    return best


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short durations (smoke test, ~1 min)")
    ap.add_argument("--only", help=f"comma-separated parts: {','.join(PARTS)}")
    ap.add_argument("--emulator", type=Path, default=DEFAULT_EMULATOR, help="longlook-link binary")
    ap.add_argument("--fifo", action="store_true", help="run longlook-link with --fifo (SCHED_FIFO)")
    ap.add_argument("--perf", action="store_true",
                    help="profile the router (perf record) in the impaired part; report in bench/build/")
    ap.add_argument("--nice", type=int, default=0, metavar="N",
                    help="run router, ns-3, iperf3 and probes at nice N (e.g. -20 on a shared, busy host)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (schedules, ground-truth logs)")
    ap.add_argument("--wait-idle", type=float, default=0, metavar="S",
                    help="before each part, wait up to S seconds for the host to be <10%% busy")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("emulator_bench.py needs root (network namespaces)")
    for tool in ("iperf3", "ip", "cc"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} missing: run scripts/install-bench-deps.sh")

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)  # also when started in the background (SIGINT ignored)
    bl.sweep_stale()
    load_start = loadavg()
    tmp = Path(tempfile.mkdtemp(prefix="llbench-"))
    bl.placeholder(str(tmp), "$TMP")
    started = time.time()
    if args.emulator.exists():
        # A rebuild during the run must not mix versions: every part runs this copy.
        copy = tmp / "longlook-link"
        shutil.copy2(args.emulator, copy)
        emulator_info = {"path": str(args.emulator), "mtime": time.strftime(
            "%Y-%m-%dT%H:%M:%S", time.localtime(args.emulator.stat().st_mtime)), "sha256": sha256(copy)[:16]}
        args.emulator = copy
        bl.placeholder(str(copy), str(emulator_info["path"]))
    else:
        emulator_info = {"path": str(args.emulator), "missing": True}
    bench = Bench(args, tmp)
    try:
        with bl.HostSysctls():
            result = bench.main()
    finally:
        if args.keep:
            bl.log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    result.update(
        config={"quick": args.quick, "fifo": args.fifo, "nice": args.nice, "tcp_seconds": bench.secs, "omit_seconds": bench.omit,
                "probes": bench.probes[0], "probe_interval_us": bench.probes[1], "schedules": SCHEDULES,
                "emulator": emulator_info},
        host={"kernel": platform.release(), "cpus": os.cpu_count(), "iperf3": iperf3_version(),
              "loadavg_start": load_start, "loadavg_end": loadavg()},
        wall_seconds=round(time.time() - started, 1),
        commands=bl.COMMANDS,
    )
    print(json.dumps(result), flush=True)
    return 1 if result.get("errors") else 0


def sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def host_busy_pct(seconds: float = 1.0) -> float:
    """CPU busy % of the whole host over `seconds` (100% = all cores), from /proc/stat."""
    def sample():
        v = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait

    (t0, i0), _, (t1, i1) = sample(), time.sleep(seconds), sample()
    return round(100 * (1 - (i1 - i0) / max(1, t1 - t0)), 1)


def wait_idle(limit: float) -> float:
    """Other work on this 2-core machine skews every number: wait up to `limit` s for
    the host to be below 10% busy (between parts, so the benchmark's own processes are
    gone); return the busy % last seen."""
    deadline = time.monotonic() + limit
    busy = host_busy_pct()
    while busy >= 10 and time.monotonic() < deadline:
        busy = host_busy_pct()
    if busy >= 10:
        bl.log(f"note: host {busy}% busy before this part: other processes compete for the 2 cores")
    return busy


def iperf3_version() -> str:
    return subprocess.run(["iperf3", "--version"], capture_output=True, text=True).stdout.split("\n")[0]


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        bl.log("interrupted; cleaned up")
        sys.exit(130)
