"""The `longlook` command: run one transfer through the emulated link, list stacks.

    longlook transfer --impl aioquic --cc cubic --bytes 5MB --rate 50mbit --rtt 40ms --loss 0.01 --out runs/a
    longlook transfer --mode virtual --impl aioquic ...   (in-process, virtual time; docs/virtual-time.md)
    longlook transfer --backend docker --impl quinn ...   (one container per role; docs/docker.md)
    longlook transfer --impl aioquic --impl-cmd ./run_endpoint.sh ...   (your own program, no Docker)
    longlook impls
    longlook coverage [artifacts/model-coverage] [--diagrams DIR]
    longlook coverage --requirements [RESULTS.xml ...]   (spec/requirements.toml; docs/requirements.md)
    longlook traps [--refresh]                     (TLC's paths to each model transition, spec/traps.json)
    longlook report RESULTS.ndjson ... --out DIR   (a static HTML matrix from `pytest --results`)

Every user error ends as one line on stderr naming the problem and the fix, exit 2;
a transfer that fails ends with exit 1 and its artifacts kept.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from harness import endpoints
from harness.schedule import units
from harness.endpoints import StackError
from harness.schedule import IidLoss, LinkSettings, Phase, Schedule
from harness.run.replay import _on_controller, _replay_backend, cmd_replay  # noqa: F401  (tests call them here)

#: Bytes in one full-size packet, for sizing queues from the BDP.
MTU = 1500


def link_schedule(rate_bps: int, rtt_us: int, loss: float, queue_bytes: int | None, seed: int) -> Schedule:
    """A symmetric link: rate each way, half the RTT of delay each way, iid loss each
    way, a drop-tail queue of one BDP (at least 10 packets) unless given."""
    bdp = rate_bps * rtt_us // 8_000_000
    queue = queue_bytes or max(bdp, 10 * MTU)
    settings = LinkSettings(
        rate_bps=rate_bps, delay_us=rtt_us // 2, queue_bytes=queue,
        loss=IidLoss(loss) if loss > 0 else None,
    )
    return Schedule(seed=seed, phases=(Phase(start_us=0, c2s=settings, s2c=settings),))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="longlook", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("transfer", help="run one verified transfer through the emulated link")
    t.add_argument("--impl", required=True,
                   help=f"stack: {', '.join(endpoints.STACKS)}, or an entry of docker/stacks.json")
    t.add_argument("--cc", help="congestion control (e.g. newreno, cubic, bbr, or module:Factory)")
    t.add_argument("--direction", choices=("download", "upload"), default="download",
                   help="download: --impl's server sends (default); upload: --impl's client sends")
    t.add_argument("--client", help="a download's client stack (default: --impl's); --impl's server sends to it")
    t.add_argument("--server", help="an upload's server stack (default: --impl's); --impl's client sends to it")
    t.add_argument("--bytes", default="1MB", help="total bytes to fetch, e.g. 20MB (default 1MB)")
    t.add_argument("--streams", type=int, default=1, help="split into this many objects fetched in parallel")
    t.add_argument("--schedule", type=Path, help="schedule JSON (docs/emulator.md); instead of --rate/--rtt/--loss")
    t.add_argument("--rate", help="bottleneck rate each way, e.g. 50mbit")
    t.add_argument("--rtt", help="round-trip time, e.g. 40ms (half each way)")
    t.add_argument("--loss", default="0", help="iid loss each way as a fraction, e.g. 0.01")
    t.add_argument("--queue", help="bottleneck queue, e.g. 64KB (default: one BDP)")
    t.add_argument("--seed", type=int, default=1, help="seed of the link's random choices")
    t.add_argument("--timeout", default="120s", help="give up after this long (default 120s)")
    t.add_argument("--no-pcap", action="store_true", help="do not capture packets")
    t.add_argument("--out", type=Path, required=True, help="directory for the run's artifacts")
    t.add_argument("--mode", choices=("real", "virtual"), default="real",
                   help="real time in namespaces (default) or virtual time in-process (sans-IO stacks)")
    t.add_argument("--backend", choices=("local", "docker"), default="local",
                   help="where endpoints run: local namespaces (default) or Docker containers (docs/docker.md)")
    t.add_argument("--image", help="with --backend docker: run this image (default: the stack's in docker/stacks.json)")
    t.add_argument("--impl-cmd", help="run this local program as the --impl's endpoint, without Docker (docs/docker.md)")
    sub.add_parser("impls", help="list stacks, their CC algorithms and capabilities")
    r = sub.add_parser("replay", help="re-run exactly the property example saved in DIR")
    r.add_argument("dir", type=Path, help="an example directory (the path a failure report names)")
    r.add_argument("--mode", choices=("real", "virtual", "saved"), default="saved",
                   help="replay in the mode the example ran in (saved, the default: exactly that example), "
                        "in real time (re-checks a virtual-time failure) or in virtual time")
    r.add_argument("--cc", help="replay on another controller of the same stack (e.g. the stock controller a "
                                "mutant or a candidate fix was made from) instead of the saved one")
    c = sub.add_parser("coverage", help="which TLA+ model transitions the recorded runs reached, per stack; "
                                        "with --requirements, which RFC requirements are judged")
    c.add_argument("paths", nargs="*", type=Path,
                   help="model-coverage files or directories (default: artifacts/model-coverage); "
                        "with --requirements, JUnit XML files of `pytest properties/ --junitxml`")
    c.add_argument("--diagrams", type=Path, help="write each stack's state diagram (covered edges green) here")
    c.add_argument("--requirements", action="store_true",
                   help="print the requirement catalogue (spec/requirements.toml): its judges, and per stack "
                        "judged / not exercised / not observable / unjudged from the JUnit XML files given")
    tp = sub.add_parser("traps", help="the TLC paths to each model transition that directed generation turns "
                                      "into schedules (spec/traps.json), and whether they are current")
    tp.add_argument("--refresh", action="store_true",
                    help="recompute them with TLC (a few minutes) after the model changed; commit spec/traps.json")
    rp = sub.add_parser("report", help="a static HTML site (matrix, evidence, findings, requirement coverage) "
                                       "from the results of `pytest properties/ --results FILE`")
    rp.add_argument("results", nargs="+", type=Path,
                    help="results files (NDJSON) or directories of them; several shards merge into one matrix")
    rp.add_argument("--out", type=Path, required=True, help="directory for the site (index.html)")
    rp.add_argument("--no-plots", action="store_true", help="do not draw the failing examples' cwnd plots")
    rp.add_argument("--model-coverage", type=Path, metavar="DIR",
                    help="the model coverage the properties recorded (artifacts/model-coverage): adds model.html "
                         "and each stack · controller's state machine as its runs took it")
    rp.add_argument("--reproductions", nargs="+", type=Path, metavar="DIR",
                    help="`longlook reproduce --out` directories: adds reproductions.html, their tables and plots")
    rp.add_argument("--baseline", nargs="+", type=Path, metavar="OLD_RESULTS",
                    help="earlier results to compare with: changed cells are marked, changes.html lists them, and "
                         "the exit status is 1 when a cell regressed (passed or expected → failed)")
    from harness.reproduce.cli import add_parser
    from harness.versions import cli as versions_cli

    add_parser(sub)
    versions_cli.add_parser(sub)
    return p


def _schedule_from_args(a: argparse.Namespace) -> Schedule:
    if a.schedule is not None:
        if a.rate or a.rtt:
            raise units.UnitError("give either --schedule or --rate/--rtt/--loss, not both")
        from harness.testbed.link import check_schedule

        check_schedule(a.schedule)
        return Schedule.from_json(json.loads(a.schedule.read_text()))
    if not (a.rate and a.rtt):
        raise units.UnitError("give --rate and --rtt (e.g. --rate 50mbit --rtt 40ms), or --schedule FILE")
    queue = units.size_bytes(a.queue, "--queue") if a.queue else None
    return link_schedule(units.rate_bps(a.rate), units.time_us(a.rtt), units.fraction(a.loss), queue, a.seed)


def _select_backend(a: argparse.Namespace) -> None:
    """Puts the run's backend where harness.testbed.docker_backend reads it, as the pytest plugin does."""
    import os

    from harness.testbed import commands, docker_backend

    if a.image and a.backend != "docker":
        raise units.UnitError("--image needs --backend docker")
    if a.impl_cmd and (a.backend != "local" or a.mode != "real"):
        raise units.UnitError("--impl-cmd runs a local program in the namespaces: not with --backend docker or --mode virtual")
    if a.mode == "virtual" and a.backend != "local":
        raise units.UnitError("--mode virtual runs the stack in-process; it has no --backend docker")
    for opt in ("client", "server"):
        if getattr(a, opt, None) and (a.backend != "local" or a.mode != "real"):
            raise units.UnitError(f"--{opt}: a mixed pair runs in real time on the local backend")
    if getattr(a, "direction", "download") == "upload" and (a.backend != "local" or a.mode != "real"):
        raise units.UnitError("--direction upload runs in real time on the local backend")
    os.environ[docker_backend.BACKEND_ENV] = a.backend
    for env, value in ((docker_backend.IMAGE_ENV, a.image), (commands.IMPL_CMD_ENV, a.impl_cmd)):
        if value:
            os.environ[env] = value
        else:
            os.environ.pop(env, None)


def cmd_transfer(a: argparse.Namespace) -> int:
    from harness.testbed.docker_backend import load_for_run, open_testbed
    from harness.testbed.topology import EndpointOptions, TransferPlan, interrupts_as_exceptions

    _select_backend(a)
    stack = load_for_run(a.impl)
    stack.resolve_cc(a.cc)
    wanted, other = ("server", "client") if a.direction == "upload" else ("client", "server")
    if getattr(a, other):
        raise units.UnitError(f"--{other}: in a{'n' if a.direction == 'upload' else ''} {a.direction} --impl is that "
                              f"end; name the receiver with --{wanted}")
    try:
        peer = load_for_run(getattr(a, wanted)) if getattr(a, wanted) else None
    except StackError as e:
        raise StackError(f"--{wanted}: {e}") from None
    peer = endpoints.receiver(stack, peer, a.direction)
    for s in (stack, peer):
        if s is not None and a.backend == "local" and not s.is_built():
            raise StackError(f"{s.name} is not built ({s.run} or its build output is missing); run `make setup`")
    if Path(a.out).is_dir() and any(Path(a.out).iterdir()):
        # A second run's logs beside the first's would mix (two app logs' clocks, two
        # qlogs): refused, and the earlier run is left as it was.
        raise units.UnitError(f"--out {a.out}: holds an earlier run; give a new directory, or remove that one")
    total = units.size_bytes(a.bytes)
    if a.streams < 1:
        raise units.UnitError("--streams: must be at least 1")
    sizes = tuple(total // a.streams + (1 if i < total % a.streams else 0) for i in range(a.streams))
    schedule = _schedule_from_args(a)
    timeout_s = units.time_us(a.timeout, "--timeout") / 1e6
    opts = EndpointOptions(cc=a.cc, timeout_s=timeout_s)
    plan = TransferPlan(sizes=sizes, testcase="multiplexing", direction=a.direction)
    if a.mode == "virtual":
        from harness import virtual

        try:
            result = virtual.transfer(schedule, a.out, stack, plan, opts)
        except virtual.RealTimeOnly as e:
            raise StackError(f"--mode virtual: {e}; use --mode real") from None
    else:
        with interrupts_as_exceptions(), open_testbed(schedule, a.out, stack, pcap=not a.no_pcap) as bed:
            result = bed.transfer(stack, plan, opts, peer=peer)
    if result.ok:
        role = "server" if a.direction == "upload" else "client"
        pair = (" (upload)" if a.direction == "upload" else "") + (f" to {peer.name}'s {role}" if result.peer_stack else "")
        print(f"{stack.label} {a.cc or stack.default_cc}{pair}: {result.bytes} bytes in {result.duration_s:.3f} s, "
              f"goodput {result.goodput_bps / 1e6:.2f} Mbit/s; artifacts in {a.out}")
        from harness.report.outputs import write_observation

        for note in write_observation(a.out.resolve(), stack.name, bool(stack.honours.get("qlog")), stack.resolve_cc(a.cc).beta):
            print(f"note: {note}")
        return 0
    verdict = "unsupported" if result.unsupported else "FAILED"
    print(f"{stack.name}: {verdict}: {result.reason}; artifacts in {a.out}", file=sys.stderr)
    return 1


def cmd_impls(_: argparse.Namespace) -> int:
    from harness.endpoints import releases

    for s in endpoints.available():
        ccs = ", ".join(
            f"{c.name} ({c.family}{'' if c.beta is None else f', β {c.beta}'})" for c in s.cc.values()
        )
        honours = ", ".join(k for k, v in sorted(s.honours.items()) if v) or "-"
        built = "built" if s.is_built() else "not built (make setup)"
        print(f"{s.name:9} {s.version:10} {built}\n  cc: {ccs} [default {s.default_cc}]\n  honours: {honours}")
        if set(s.roles) != {"client", "server"}:
            print(f"  {' and '.join(s.roles)} only (speaks {', '.join(s.alpn)}); paired with {s.peer or 'a named peer'}")
        if s.name in releases.REGISTRIES:
            have = releases.installed(s.name)
            print(f"  releases: any from {releases.REGISTRIES[s.name].name} as --impl {s.name}@VERSION; "
                  f"installed: {', '.join(have) if have else 'none yet'} ({releases.release_dir(s.name, 'x').parent})")
    return 0


def cmd_coverage(a: argparse.Namespace) -> int:
    if a.requirements:
        return _requirement_coverage(a)
    from harness.model.coverage import report

    try:
        print(report(a.paths or [Path("artifacts/model-coverage")], a.diagrams))
    except FileNotFoundError as e:
        raise units.UnitError(str(e)) from None
    return 0


def cmd_traps(a: argparse.Namespace) -> int:
    from harness.model import traps

    if a.refresh:
        paths = traps.refresh()
        print(f"{traps.CACHE}: {sum(1 for p in paths.values() if p)} paths for {len(paths)} model transitions")
        return 0
    try:
        paths = traps.load()
    except traps.StaleTraps as e:
        raise units.UnitError(str(e)) from None
    for t, steps in sorted(paths.items()):
        print(f"{' '.join(t)}: " + " → ".join(s.action + (f"({s.pn})" if s.pn >= 0 else "") for s in steps))
    return 0


def _requirement_coverage(a: argparse.Namespace) -> int:
    """The catalogue as a table: without results its judges and counts per strength;
    with JUnit XML files, a column per stack-controller they ran."""
    from harness.verdict import requirements as rq

    if a.diagrams:
        raise units.UnitError("--diagrams draws model transitions; leave it out with --requirements")
    try:
        reqs = rq.load()
        results = rq.read_junit(a.paths) if a.paths else None
    except rq.RequirementsError as e:
        raise units.UnitError(str(e)) from None
    print(rq.render(rq.table(reqs, results)))
    print()
    print(rq.render(rq.counts(reqs)))
    if results is not None and not results:
        print(f"note: no property case in {', '.join(map(str, a.paths))}")
    return 0


#: Without a terminal (a CI log), a progress line at most this often, seconds.
PROGRESS_EVERY_S = 10.0


@contextlib.contextmanager
def _progress(what: str):
    """A progress callback (done, total) for a long loop: a rich bar on a terminal,
    else a plain line on stderr every PROGRESS_EVERY_S, so no run is silent for long."""
    import time

    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import Progress

        with Progress(console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(what, total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)
        return
    last = [time.monotonic()]

    def line(done: int, total: int) -> None:
        if time.monotonic() - last[0] >= PROGRESS_EVERY_S:
            last[0] = time.monotonic()
            print(f"{what}: {done} of {total}", file=sys.stderr, flush=True)

    yield line


def cmd_report(a: argparse.Namespace) -> int:
    from harness.report.site import build_site
    from harness.results.store import ResultsError, coverage, read

    try:
        results = read(a.results)
        baseline = read(a.baseline).records if a.baseline else None
    except ResultsError as e:
        raise units.UnitError(str(e)) from None
    from harness.verdict.requirements import RequirementsError

    try:
        cov = coverage(results.records)
    except RequirementsError as e:
        raise units.UnitError(str(e)) from None
    try:
        with _progress("cells") as progress:
            made = build_site(results.records, a.out, sources=results.sources, coverage=cov,
                              plots=not a.no_plots, baseline=baseline, model_coverage=a.model_coverage,
                              reproductions=a.reproductions, progress=progress)
    except FileNotFoundError as e:
        raise units.UnitError(str(e)) from None
    except OSError as e:
        raise units.UnitError(f"--out {a.out}: cannot write the report ({e})") from None
    for note in made["notes"]:
        print(f"note: {note}", file=sys.stderr)
    replaced = f", {results.replaced} replaced by a later record" if results.replaced else ""
    print(f"{a.out / 'index.html'}: {made['records']} records from {len(results.sources)} file(s){replaced}, "
          f"{made['cells']} cells, {made['plots']} plots, {made['seconds']} s")
    if baseline is None:
        return 0
    from harness.report.baseline import summary

    changes = made["changes"]
    print(f"against the baseline: {summary(changes)} ({a.out / 'changes.html'})")
    for (prop, row), c in sorted(changes.items()):
        if c.kind in ("regression", "improvement"):
            print(f"  {c.kind}: {prop} on {'-'.join(map(str, (row[0], row[2])))}: {c.was} → {c.now}")
    return 1 if any(c.kind == "regression" for c in changes.values()) else 0


def cmd_reproduce(a: argparse.Namespace) -> int:
    from harness.reproduce.cli import run

    from harness.report import reproduction

    with _progress(f"reproduce {a.experiment or ''}".strip()) as progress:
        done = run(a, progress)
    if done is None:
        return 0
    print(reproduction.write(*done, a.out))
    return 0 if all(r.get("ok") for r in done[1]) else 1


def cmd_versions(a: argparse.Namespace) -> int:
    from harness.versions.cli import run

    with _progress(f"versions {a.stack}") as progress:
        return run(a, progress)


#: Commands that may build a testbed: without root they enter their user namespace
#: first, before a progress bar or anything else starts a thread (harness.testbed.rootless).
_NAMESPACE_COMMANDS = {"transfer", "replay", "reproduce", "versions"}


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if a.command in _NAMESPACE_COMMANDS and os.geteuid() != 0:
        from harness.testbed import rootless

        try:
            rootless.enter()
        except rootless.RootlessError:
            pass  # a testbed, if one is needed, says why in one line; virtual time runs regardless
    from harness.testbed.link import LinkError, ScheduleError
    from harness.testbed.netns import NetnsError
    from harness.model.tlc import TlcError
    from harness.reproduce.experiments import ExperimentError
    from harness.testbed.topology import TestbedError

    try:
        return {"transfer": cmd_transfer, "impls": cmd_impls, "replay": cmd_replay,
                "coverage": cmd_coverage, "traps": cmd_traps, "report": cmd_report,
                "reproduce": cmd_reproduce, "versions": cmd_versions}[a.command](a)
    except (StackError, units.UnitError, ExperimentError, TestbedError, ScheduleError, LinkError, NetnsError, TlcError) as e:
        print(f"longlook: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("longlook: interrupted; the testbed was cleaned up", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
