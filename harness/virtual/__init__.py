"""Virtual-time runs: a sans-IO stack and the emulator's own core in one process,
driven by a discrete-event loop (docs/virtual-time.md). aioquic runs in this
process (harness/virtual/loop.py); quinn and quiche run in the Rust binaries
quinn-virtual and quiche-virtual, which link the same core (harness/virtual/rust.py).

    from harness.virtual import transfer
    result = transfer(schedule, out_dir, stack, plan, opts)   # a TransferResult

The run directory has the real-time layout (docs/testbed.md): schedule.json,
link.ndjson (written by the core's record path), pcap/{client,server}.pcap,
{client,server}/{qlog/,keys.log,app.ndjson}, www/, certs/, result.json. Everything
in it is a function of (schedule, plan, options): no paths, no wall-clock times.
"""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

from harness.schedule import Flow, Schedule

#: Stacks that can run in virtual time, and why the others cannot.
SUPPORTED = ("aioquic", "quinn", "quiche")
WHY_NOT = {
    "tcp": "kernel TCP runs in the kernel's own time",
}
CLIENT = ("198.18.0.1", 40000)
SERVER = ("198.19.0.1", 4433)
#: aioquic's initial window is fixed (congestion/base.py K_INITIAL_WINDOW), packets.
FIXED_INITIAL_WINDOW = 10


class RealTimeOnly(Exception):
    """The stack or the plan cannot run in virtual time; the message says why.
    Callers turn it into a skip, never a silent fallback to real time."""


#: Stacks whose virtual-time host is a program compiled against the pinned release.
COMPILED_HOSTS = ("quinn", "quiche")


def supports(stack_name: str) -> str | None:
    """None if `stack_name` (or a release of it, name@version) runs in virtual time,
    else the reason it does not."""
    stack_name, _, version = stack_name.partition("@")
    if version and stack_name in COMPILED_HOSTS:
        return (f"{stack_name}@{version} is real time only: the virtual-time host is compiled against the pinned "
                f"{stack_name}; a release's own build is its real-time endpoint")
    if stack_name in SUPPORTED:
        return None
    why = WHY_NOT.get(stack_name, "its endpoint is a separate process that reads the real clock")
    return f"{stack_name} is real time only: {why}"


#: Stacks whose virtual backend runs several competing QUIC connections.
MULTI_FLOW = ("quinn", "quiche")


def check_plan(plan, stack_name: str | None = None) -> None:
    """RealTimeOnly for plans that need the kernel (competing TCP flows) or that
    the stack's virtual backend cannot run yet (several QUIC connections: quinn
    and quiche only)."""
    if getattr(plan, "direction", "download") != "download":
        raise RealTimeOnly("an upload runs in real time: the virtual backends' server sends")
    if plan.tcp_flows:
        raise RealTimeOnly(f"the plan has {plan.tcp_flows} competing kernel TCP flow(s); "
                           "kernel TCP runs in real time only")
    if getattr(plan, "quic_flows", 1) > 1 and stack_name not in MULTI_FLOW:
        # One client and one server here; running one flow instead would be a
        # silently different experiment.
        raise RealTimeOnly(f"the plan has {plan.quic_flows} competing QUIC connections; "
                           f"the virtual backend runs one for {stack_name or 'this stack'} "
                           f"(several: {', '.join(MULTI_FLOW)})")


def _select_cc(spec: str | None) -> tuple[str, str]:
    """(name for the version record, name registered in aioquic), as the endpoint."""
    spec = spec or "newreno"
    if ":" in spec:
        from aioquic.quic.congestion.base import register_congestion_control

        module_name, attr = spec.split(":", 1)
        native = f"longlook:{spec}"
        register_congestion_control(native, getattr(importlib.import_module(module_name), attr))
        return spec, native
    from harness.virtual.aioquic_hosts import NATIVE_CC

    if spec not in NATIVE_CC:
        raise ValueError(f"cc {spec!r} unsupported (aioquic has newreno, cubic, or module:Factory)")
    return ("newreno" if spec == "reno" else spec), NATIVE_CC[spec]


def transfer(schedule: Schedule, out_dir: str | Path, stack, plan, opts):
    """One verified transfer of `plan` in virtual time; returns a TransferResult
    (written to result.json). RealTimeOnly for stacks or plans it cannot run."""
    return transfer_with_stats(schedule, out_dir, stack, plan, opts)[0]


def transfer_with_stats(schedule: Schedule, out_dir: str | Path, stack, plan, opts):
    """As `transfer`, also returning the loop's statistics (virtual_s, steps,
    wall_clock_s, per-host datagram counts, the link summary)."""
    from harness.testbed.contract import TransferResult, unhonoured, write_objects

    why = supports(stack.name)
    if why:
        raise RealTimeOnly(why)
    check_plan(plan, stack.name)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    unsupported = unhonoured(stack, opts)
    if not opts.offload:
        # The virtual loop moves datagrams one by one between the stacks: there is no
        # socket whose offload could be switched, so "off" would measure nothing new.
        unsupported = "offloads off (LL_OFFLOAD=off) unsupported in virtual time: it has no sockets; use --mode real"
    if stack.name == "aioquic" and opts.initial_window and opts.initial_window != FIXED_INITIAL_WINDOW:
        unsupported = f"initial window {opts.initial_window} unsupported (aioquic's is fixed at {FIXED_INITIAL_WINDOW} packets)"
    digests = write_objects(out / "www", plan.sizes, plan.seed) if not unsupported else {}
    started, cpu = time.perf_counter(), time.process_time()
    if not unsupported and stack.name in ("quinn", "quiche"):
        from harness.virtual import rust

        cpu_children = _children_cpu_s()
        try:
            stats = rust.run(schedule, out, plan, opts, list(digests), stack=stack.name)
        except rust.Unsupported as e:
            unsupported = str(e)
        # The stack runs in a child process: its CPU time is the children's.
        cpu -= _children_cpu_s() - cpu_children
    elif not unsupported and stack.release_dir:
        from harness.virtual import release

        cpu_children = _children_cpu_s()
        stats = release.run(stack.release_dir, schedule, out, plan, opts, list(digests))
        cpu -= _children_cpu_s() - cpu_children
    elif not unsupported:
        stats = _run(schedule, out, plan, opts, list(digests))
    if unsupported:
        result = TransferResult(stack=stack.name, cc=opts.cc, ok=False, reason=unsupported, unsupported=True,
                                bytes=0, duration_s=0.0, goodput_bps=0.0, out_dir=str(out))
        _write_result(out, result, {})
        return result, {}
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    result = _result(stack.name, opts, out, digests, stats)
    _write_result(out, result, stats)
    # Returned to the caller only: the files stay deterministic.
    stats["wall_clock_s"], stats["cpu_s"] = wall, cpu
    return result, stats


def _children_cpu_s() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(schedule: Schedule, out: Path, plan, opts, names: list[str]) -> dict:
    import aioquic
    import longlook_link

    from harness.virtual import aioquic_hosts as aq
    from harness.virtual.determinism import EPOCH_UNIX_NS, deterministic_aioquic, write_cert
    from harness.virtual.loop import Clock, EventLoop
    from harness.virtual.qlog_sink import VirtualQlog

    schedule_path = schedule.write(out / "schedule.json")
    (out / "pcap").mkdir(exist_ok=True)
    certs = out / "certs"
    write_cert(certs, aq.SERVER_NAME, schedule.seed, plan.cert_padding)
    roles = {r: out / r for r in ("client", "server")}
    for d in roles.values():
        (d / "qlog").mkdir(parents=True, exist_ok=True)
    (roles["client"] / "downloads").mkdir(exist_ok=True)
    cc_name, native = _select_cc(opts.cc)
    if opts.max_window:
        from harness.endpoints.aioquic.window_cap import register_capped

        native = register_capped(native, opts.max_window)
    applogs = {r: aq.AppLog(d / "app.ndjson", EPOCH_UNIX_NS) for r, d in roles.items()}
    for log in applogs.values():
        log.version(aioquic.__version__, cc_name, native)
    link = longlook_link.Link(str(schedule_path), str(out / "link.ndjson"), str(out / "pcap"), EPOCH_UNIX_NS,
                              ["longlook-virtual", "aioquic"])
    clock = Clock()

    with deterministic_aioquic(schedule.seed ^ plan.seed, lambda: clock.ns):
        mds = opts.max_datagram_size or 1252
        configs = {r: aq.configuration(is_client=r == "client", cc=native, flow_window=opts.flow_window,
                                       max_datagram_size=mds, keylog=d / "keys.log", certs=certs,
                                       qlog=VirtualQlog(clock, EPOCH_UNIX_NS) if opts.qlog else None)
                   for r, d in roles.items()}
        server = aq.Server(*SERVER, configs["server"], out / "www", applogs["server"])
        client = aq.Client(*CLIENT, configs["client"], SERVER, names, plan.testcase, plan.think_ms,
                           roles["client"] / "downloads", applogs["client"])
        if opts.ack_hold_ms:  # the client receives: virtual time runs downloads only
            from harness.endpoints.aioquic.ack_hold import hold_acks

            hold_acks(client.conn, opts.ack_hold_ms)
        loop = EventLoop(link, client, server, clock)
        client.start(0.0)
        try:
            finished = loop.run(int(opts.timeout_s * 1e9))
        finally:
            for r, config in configs.items():
                aq.write_qlogs(config, roles[r] / "qlog")
                config.secrets_log_file.close()
            for log in applogs.values():
                log.fp.close()
            summary = json.loads(link.close())
    if not finished:
        client.error = client.error or f"gave up after LL_TIMEOUT_S={opts.timeout_s:g} (virtual)"
    return {"error": client.error, "virtual_s": loop.now_ns / 1e9, "steps": loop.steps, "link": summary,
            "client": client.counters, "server": server.counters}


def _result(stack_name: str, opts, out: Path, digests: dict[str, str], stats: dict):
    from harness.testbed.contract import TransferResult, app_duration_s, sha256_of

    downloads = out / "client" / "downloads"
    got = {n: sha256_of(downloads / n) for n in digests}
    size = sum((downloads / n).stat().st_size for n, h in got.items() if h is not None)
    reason = stats["error"] or ""
    bad = [n for n in digests if got[n] != digests[n]]
    if not reason and bad:
        reason = f"wrong or missing bytes in {', '.join(bad)}"
    # Competing flows' clients, in client-k/ as in real time (quinn, quiche).
    for k in range(2, stats.get("flows", 1) + 1):
        extra = out / f"client-{k}" / "downloads"
        wrong = [n for n, h in digests.items() if sha256_of(extra / n) != h]
        if not reason and wrong:
            reason = f"client-{k}: wrong or missing bytes in {', '.join(wrong)}"
    duration = app_duration_s(out / "client" / "app.ndjson") or stats["virtual_s"]
    return TransferResult(stack=stack_name, cc=opts.cc, ok=not reason, reason=reason, unsupported=False,
                          bytes=size, duration_s=duration, goodput_bps=size * 8 / duration if duration > 0 else 0.0,
                          out_dir=str(out), client_rc=0 if not reason else 1, server_rc=0,
                          wall_s=stats.get("virtual_s"), transfer=Flow("udp", "server", *SERVER))


def _write_result(out: Path, result, stats: dict) -> None:
    # out_dir is the one path in a result; a virtual run's files name none.
    data = result.to_json() | {"out_dir": ".", "mode": "virtual",
                               "virtual": {k: stats[k] for k in ("virtual_s", "steps", "client", "server") if k in stats}}
    (out / "result.json").write_text(json.dumps(data, indent=2) + "\n")
