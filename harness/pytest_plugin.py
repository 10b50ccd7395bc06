"""longlook's pytest plugin: which stacks and controllers to test, where artifacts
go, Hypothesis profiles, and a report section with the replay line of a failure.

Options (group "longlook"; each also settable by environment variable):
  --impl NAME[,NAME…]   stacks to test (LONGLOOK_IMPL; default: every built stack)
  --cc ALG[,ALG]        the CCs for every stack, or module:Factory (LONGLOOK_CC)
  --artifacts DIR       where examples are kept (LONGLOOK_ARTIFACTS; default artifacts/)
  --keep-passing        keep every example's directory: the passing ones too, and the
                        failing ones that shrinking replaced
  --longlook-replay DIR re-run exactly the example saved in DIR
  --backend local|docker  where endpoints run (LONGLOOK_BACKEND; docs/docker.md)
  --image NAME          with --backend docker: the image for the one --impl (LONGLOOK_IMAGE)
  --impl-cmd CMD        run this local program as the one --impl's endpoint, in the
                        namespaces (LONGLOOK_IMPL_CMD; docs/docker.md "Without Docker")
  --mode auto|real|virtual  auto (the default): virtual time where the stack and the
                        property allow it, real time for the rest; real: namespaces
                        only; virtual: sans-IO stacks only (LONGLOOK_MODE;
                        docs/virtual-time.md)
  --only-mode virtual|real  of the cases --mode auto places, run only those in virtual
                        (or real) time: `make check` runs the first two at a time,
                        then the second alone (LONGLOOK_ONLY_MODE)
  --no-real-recheck     do not replay a failure found in virtual time in real time
  --results FILE        write one JSON record per property case (NDJSON; harness/results/),
                        for `longlook report` (LONGLOOK_RESULTS)
  --shard I/N           run part I of N of the collected cases (LONGLOOK_SHARD;
                        harness/results/shards.py), balanced by --shard-durations RESULTS

Hypothesis profiles, chosen with Hypothesis' own --hypothesis-profile:
  ci       a few derandomised examples per property; deadline off; shrinking bounded
  dev      the default: more examples, still quick
  release  thorough: many examples and full statistics for slow properties
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

from harness.verdict import profiles

IMPL_HELP = "stacks to test, comma-separated (default: every stack that is built)"
CC_HELP = ("congestion control for every stack: a name (newreno, cubic, bbr) or module:Factory, or several "
           "separated by commas (newreno,bbr); default: each stack's loss-based controllers")
ARTIFACTS_HELP = "directory for the examples' artifacts (default: artifacts/)"
REPLAY_ENV = "LONGLOOK_REPLAY"
BACKEND_HELP = "where endpoints run: local (namespaces) or docker (one container per role; docs/docker.md)"
MODE_HELP = ("auto (default): virtual time where the stack and the property allow it, else real time; "
             "real: endpoints in namespaces, real time; virtual: sans-IO stacks in virtual time only "
             "(docs/virtual-time.md)")
ONLY_MODE_HELP = ("of the cases --mode auto places, run only those in virtual time (several at a time under "
                  "-n N: a virtual clock does not care for a shared CPU) or only those in real time")
RECHECK_HELP = "do not replay an example that failed in virtual time in real time to see whether it reproduces"
IMAGE_HELP = "with --backend docker: run this image for the single --impl (default: the image in docker/stacks.json)"
IMPL_CMD_HELP = ("run this program (interop-runner contract, no Docker) as the endpoint of the single --impl, "
                 "whose CC list and qlog dialect it shares (docs/docker.md)")

_common = dict(
    deadline=None,
    derandomize=False,
    # filter_too_much: an inconclusive or not-exercised example is a rejection, and a
    # case whose every example was one is its own outcome (harness/verdict/outcomes.py),
    # never a health-check error.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)
settings.register_profile("ci", max_examples=3, derandomize=True, **{k: v for k, v in _common.items() if k != "derandomize"})
settings.register_profile("dev", max_examples=8, **_common)
settings.register_profile("release", max_examples=40, **_common)
# Replay: only the saved schedule (no explicit @example cases, no shrinking).
settings.register_profile("replay", max_examples=1, phases=[Phase.generate], **_common)
# Hypothesis' own --hypothesis-profile, applied later at configure time, wins.
settings.load_profile("dev")


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("longlook", "longlook conformance properties")
    g.addoption("--impl", default=os.environ.get("LONGLOOK_IMPL"), help=IMPL_HELP)
    g.addoption("--cc", default=os.environ.get("LONGLOOK_CC"), help=CC_HELP)
    g.addoption("--direction", choices=("download", "upload"), default=os.environ.get("LONGLOOK_DIRECTION", "download"),
                help="which end of --impl sends the data: its server (download, the default) or its client "
                     "(upload; real time, local backend; docs/endpoints.md, LL_DIRECTION)")
    g.addoption("--client", default=os.environ.get("LONGLOOK_CLIENT"),
                help="the client's stack in a download (default: --impl at both ends): --impl's server sends to it")
    g.addoption("--server", default=os.environ.get("LONGLOOK_SERVER"),
                help="the server's stack in an upload (default: --impl at both ends): --impl's client sends to it")
    g.addoption("--artifacts", default=os.environ.get("LONGLOOK_ARTIFACTS", "artifacts"), help=ARTIFACTS_HELP)
    g.addoption("--keep-passing", action="store_true",
                help="keep every example's artifacts: the passing ones, and the failing ones shrinking replaced")
    g.addoption("--longlook-replay", default=None, help="re-run exactly the example saved in this directory")
    g.addoption("--backend", default=os.environ.get("LONGLOOK_BACKEND", "local"), choices=("local", "docker"), help=BACKEND_HELP)
    g.addoption("--mode", default=os.environ.get("LONGLOOK_MODE", "auto"), choices=("auto", "real", "virtual"),
                help=MODE_HELP)
    g.addoption("--only-mode", default=os.environ.get("LONGLOOK_ONLY_MODE") or None, choices=("virtual", "real"),
                help=ONLY_MODE_HELP)
    g.addoption("--no-real-recheck", action="store_true", help=RECHECK_HELP)
    g.addoption("--image", default=os.environ.get("LONGLOOK_IMAGE"), help=IMAGE_HELP)
    g.addoption("--impl-cmd", default=os.environ.get("LONGLOOK_IMPL_CMD"), help=IMPL_CMD_HELP)
    g.addoption("--results", default=os.environ.get("LONGLOOK_RESULTS"), metavar="FILE",
                help="write one JSON record per property case to FILE (NDJSON), for `longlook report`")
    g.addoption("--shard", default=os.environ.get("LONGLOOK_SHARD"), metavar="I/N",
                help="run part I of N of the collected cases (deterministic; merge the parts' --results)")
    g.addoption("--shard-durations", nargs="+", type=Path, default=None, metavar="RESULTS",
                help="with --shard: earlier results files whose durations balance the parts")


def pytest_configure(config: pytest.Config) -> None:
    profiles.PROFILE = config.getoption("hypothesis_profile", default=None) or "dev"
    profiles.CI_SHRINK_SECONDS = profiles.shrink_seconds()
    if profiles.PROFILE == "ci":
        # Hypothesis has no public setting for this; its engine reads the module
        # constant (300 s) when shrinking starts. Examples here take seconds each.
        from hypothesis.internal.conjecture import engine

        engine.MAX_SHRINKING_SECONDS = profiles.CI_SHRINK_SECONDS
    # Read by harness.testbed.docker_backend.open_testbed for every example.
    os.environ["LONGLOOK_BACKEND"] = config.getoption("--backend")
    if config.getoption("--image"):
        if config.getoption("--backend") != "docker":
            raise pytest.UsageError("--image needs --backend docker")
        os.environ["LONGLOOK_IMAGE"] = config.getoption("--image")
    if config.getoption("--impl-cmd"):
        _check_impl_cmd(config)
        os.environ["LONGLOOK_IMPL_CMD"] = config.getoption("--impl-cmd")
    # Read by harness.run.mode_for for every example; under auto, set again per case
    # (pytest_runtest_setup). Docker containers and a user's command are real time.
    mode = config.getoption("--mode")
    if mode == "virtual" and config.getoption("--backend") != "local":
        raise pytest.UsageError("--mode virtual runs the stack in-process; it has no --backend docker")
    if mode == "auto" and (config.getoption("--backend") != "local" or config.getoption("--impl-cmd")):
        config.option.mode = mode = "real"
    os.environ["LONGLOOK_MODE"] = mode
    only = config.getoption("--only-mode")
    if only and mode != "auto":
        raise pytest.UsageError(f"--only-mode {only} splits the cases --mode auto places; it has no meaning "
                                f"with --mode {mode} (and Docker or --impl-cmd runs are real time)")
    os.environ["LONGLOOK_ONLY_MODE"] = only or ""  # read by the runner (recheck.check_placed)
    _enter_rootless(config, "virtual" if only == "virtual" else mode)
    replay = config.getoption("--longlook-replay")
    if replay:
        # Read by harness.schedule.strategies.replayable() when test modules are imported.
        os.environ[REPLAY_ENV] = str(Path(replay).resolve())
        settings.load_profile("replay")
        profiles.PROFILE = "replay"
    if config.getoption("--results"):
        config.pluginmanager.register(_Results(config), "longlook-results")
    if config.getoption("--shard-durations") and not config.getoption("--shard"):
        raise pytest.UsageError("--shard-durations balances --shard I/N: give --shard too")
    if config.getoption("--shard"):
        from harness.results.shards import ShardError, parse

        try:
            parse(config.getoption("--shard"))
        except ShardError as e:
            raise pytest.UsageError(str(e)) from None
    if config.getoption("--impl") or config.getoption("--cc"):
        # A stack or controller the run cannot have is the user's input: refuse it now,
        # in one line, rather than as a collection error of the first property module.
        config._longlook_targets = _targets(config)
    config.addinivalue_line("markers", "real_time_only(reason): needs the kernel or real CPU time; skipped in --mode virtual")
    config.addinivalue_line("markers", "plans(**fields): what every example's TransferPlan holds (quic_flows=2), so "
                                       "the case's time is known before it runs")
    config.addinivalue_line("markers", "slow: long runs or repetitions; fixed @example cases only under the ci profile")


def _enter_rootless(config: pytest.Config, mode: str) -> None:
    """A non-root run that may need namespaces enters its user namespace now, while
    it is one thread (harness.testbed.rootless). A refusal is left to the real-time
    cases, which each say why; virtual-time cases run regardless."""
    if os.geteuid() == 0 or mode == "virtual" or config.getoption("--backend") != "local":
        return  # the Docker backend needs the host's root, and says so
    if not (config.getoption("--impl") or config.getoption("--longlook-replay")):
        return  # not a properties run (the suite's own tests load this plugin too)
    from harness.testbed import rootless

    try:
        rootless.enter()
    except rootless.RootlessError:
        pass


def _check_impl_cmd(config: pytest.Config) -> None:
    """Bad --impl-cmd input as one line, before collection (where it would print frames)."""
    from harness.testbed.commands import parse
    from harness.endpoints import StackError

    if config.getoption("--backend") != "local" or config.getoption("--mode") == "virtual":
        raise pytest.UsageError("--impl-cmd runs a local program in the namespaces: not with --backend docker or --mode virtual")
    names = config.getoption("--impl")
    if not config.getoption("--longlook-replay") and (not names or "," in names):
        raise pytest.UsageError("--impl-cmd runs one program: give a single --impl whose qlog dialect and CC list it "
                                "shares (e.g. --impl aioquic)")
    try:
        parse(config.getoption("--impl-cmd"), "--impl-cmd")
    except StackError as e:
        raise pytest.UsageError(str(e)) from None


def _targets(config: pytest.Config):
    from harness import endpoints
    from harness.endpoints import StackError
    from harness.run import Target

    replay = os.environ.get(REPLAY_ENV)
    if replay:
        saved = json.loads((Path(replay) / "example.json").read_text())
        try:  # --cc moves the saved example to another controller of its stack
            return [Target.parse(saved["stack"], config.getoption("--cc") or saved["cc"], saved.get("peer"),
                                 saved.get("plan", {}).get("direction", "download"))]
        except StackError as e:
            raise pytest.UsageError(f"cannot replay {replay}: {e}") from None
    from harness.testbed import docker_backend

    names = config.getoption("--impl")
    cc = config.getoption("--cc")
    load = docker_backend.load_for_run
    direction = config.getoption("--direction")
    wanted, other = ("--server", "--client") if direction == "upload" else ("--client", "--server")
    if config.getoption(other):
        raise pytest.UsageError(f"{other}: in a{'n' if direction == 'upload' else ''} {direction} --impl is that end; "
                                f"name the receiver with {wanted}")
    if direction == "upload" and config.getoption("--backend") == "docker":
        raise pytest.UsageError("--direction upload runs on the local backend only; drop --backend docker")
    client = None
    if config.getoption(wanted):
        if config.getoption("--backend") == "docker":
            raise pytest.UsageError(f"{wanted}: mixed pairs run on the local backend only; drop --backend docker")
        try:
            client = load(config.getoption(wanted))
        except StackError as e:
            raise pytest.UsageError(f"{wanted}: {e}") from None
    if config.getoption("--backend") == "docker":
        if not names:
            raise pytest.UsageError(f"--backend docker: name the stacks with --impl (one of {', '.join(docker_backend.stack_names())})")
        if config.getoption("--image") and "," in names:
            raise pytest.UsageError("--image runs one image: give a single --impl whose qlog dialect and CC list it shares")
    stacks = [s.strip() for s in names.split(",")] if names else [s.name for s in endpoints.available() if s.is_built()]
    targets = []
    for name in stacks:
        try:
            stack = load(name)
        except StackError as e:
            raise pytest.UsageError(f"--impl: {e}") from None
        try:
            peer = endpoints.receiver(stack, client, direction)
        except StackError as e:
            if not names:
                continue  # every built stack: one that cannot send this way is not a target
            raise pytest.UsageError(f"--impl {name}: {e}") from None
        for one in (c.strip() for c in cc.split(",")) if cc else ():
            try:
                targets.append(Target(stack, stack.resolve_cc(one), peer, direction))
            except StackError:
                continue  # this stack lacks the CC; others may have it
        if not cc:
            targets += [Target(stack, c, peer, direction) for c in stack.cc.values() if c.family in ("newreno", "cubic")]
    if not targets:
        raise pytest.UsageError(f"no stack among {stacks} offers --cc {cc!r}; see `longlook impls`")
    return targets


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" in metafunc.fixturenames:
        targets = getattr(metafunc.config, "_longlook_targets", None)
        if targets is None:
            targets = metafunc.config._longlook_targets = _targets(metafunc.config)
        metafunc.parametrize("target", targets, ids=[t.id for t in targets])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Chooses each case's mode (--mode virtual skips real-time-only properties;
    auto runs them in real time); marks the recorded findings
    (harness/verdict/findings.py) as strict xfails."""
    from harness.virtual.recheck import choose_modes, keep_only

    _keep_shard(config, items)
    choose_modes(items, config.getoption("--mode"))
    keep_only(config, items, config.getoption("--only-mode"))
    for item in items:
        _count_unjudged(getattr(item, "obj", None))
    from harness.verdict.findings import finding_for

    for item in items:
        callspec = getattr(item, "callspec", None)
        target = getattr(callspec, "params", {}).get("target")
        name = getattr(item, "originalname", item.name)
        found = finding_for(name, getattr(callspec, "id", None), target)
        if found:
            strict, reason, signature = found
            # On a release other than the pinned one a finding may be fixed or not
            # there yet: its absence is reported (XPASS), never a failure.
            strict = strict and getattr(getattr(target, "stack", None), "release_dir", None) is None
            item.add_marker(pytest.mark.xfail(strict=strict, reason=reason))
            item.stash[FINDING] = (strict, reason, signature)


def _count_unjudged(test) -> None:
    """Examples that count toward max_examples although no verdict came of them, so
    Hypothesis does not hunt through hundreds of runs; each is in the ledger all the
    same, and a case with none judged ends "not exercised" or "inconclusive", never
    passed:

    - for a target whose client starts late (caps.json `late_start_s`: a browser), an
      example whose trigger never happened, as under outcomes.rare_trigger: a schedule
      keyed to the link's clock mostly strikes before such a client has sent anything;
    - for any target, an inconclusive example past outcomes.INCONCLUSIVE_STREAK in a
      row (Undecided.counts): the runs fail to be judged for a reason of their own,
      which the next draw will not change.

    Hypothesis calls `.hypothesis.inner_test` for each example, and documents it as
    the place to wrap (pytest-trio does so); the wrap is shared by the function's
    cases."""
    inner = getattr(getattr(test, "hypothesis", None), "inner_test", None)
    if inner is None or getattr(inner, "_longlook_late_start", False):
        return
    from harness.verdict.outcomes import NotExercised, Undecided

    @functools.wraps(inner)
    def counted(*args, **kwargs):
        target = kwargs.get("target")
        late = bool(getattr(getattr(target, "stack", None), "late_start_s", 0))
        try:
            return inner(*args, **kwargs)
        except NotExercised:
            if late:
                return None  # recorded in the ledger by the runner
            raise
        except Undecided as e:
            if e.counts:
                return None  # recorded in the ledger by the runner
            raise

    counted._longlook_late_start = True
    test.hypothesis.inner_test = counted


def _keep_shard(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under --shard I/N, deselects every case outside part I."""
    if not config.getoption("--shard"):
        return
    from harness.results import shards

    try:
        mine = shards.part([i.nodeid for i in items], config.getoption("--shard"),
                           config.getoption("--shard-durations") or [])
    except shards.ShardError as e:
        raise pytest.UsageError(str(e)) from None
    config.hook.pytest_deselected(items=[i for i in items if i.nodeid not in mine])
    items[:] = [i for i in items if i.nodeid in mine]


#: On items whose case has a recorded finding: (strict, reason, signature).
FINDING = pytest.StashKey[tuple]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The case's mode for harness.run.mode_for ("auto" lets each example's plan
    decide); one process runs one case at a time, also under xdist. A case in real
    time needs namespaces (root, or the rootless mode), said before it runs."""
    from harness.virtual.recheck import MODE

    mode = item.stash.get(MODE, None)
    if mode is None:
        return
    os.environ["LONGLOOK_MODE"] = mode
    if mode == "real" and "longlook" in getattr(item, "fixturenames", ()):
        from harness.testbed.topology import require_namespaces

        require_namespaces()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Around the call of a property's case (harness/verdict/search.py):
    - a case with a recorded finding searches on past the finding: an example whose
      failure is exactly the finding's is set aside and the search goes on, so the
      finding masks no later example; the examples set aside are raised at the end,
      with whatever else failed. Under ci it is not shrunk: its minimal schedule is in
      docs/findings.md, and shrinking cost up to CI_SHRINK_SECONDS per case of the
      gate's time (the xfail still fails loudly if the stack stops failing);
    - a budgeted property (profiles.budgeted) under ci draws examples while its time
      budget lasts."""
    test = getattr(item, "obj", None)
    finding = item.stash.get(FINDING, None)
    budget = getattr(test, "_longlook_budget", None) if profiles.PROFILE == "ci" else None
    if finding is None and budget is None:
        yield
        return
    from hypothesis.internal.conjecture import engine

    from harness.verdict import search

    quick = profiles.PROFILE == "ci" and finding is not None
    if quick:
        engine.MAX_SHRINKING_SECONDS = 0
    try:
        with contextlib.ExitStack() as wraps:
            # The finding's wrap innermost: an example set aside is no failure to the budget.
            met = wraps.enter_context(search.past_the_finding(test, finding[2] if finding else None))
            runner = getattr(getattr(item, "config", None), "_longlook_runner", None)
            if budget is not None and runner is not None:
                wraps.enter_context(search.within_budget(test, budget, runner.ledger(item.nodeid)))
            outcome = yield
        found = outcome.exception if outcome is not None else None
        if met and (found is None or isinstance(found, Exception)):
            outcome.force_exception(search.joined(found, met))
    finally:
        if quick:
            engine.MAX_SHRINKING_SECONDS = profiles.CI_SHRINK_SECONDS


def pytest_report_teststatus(report, config):
    """Inconclusive and not-exercised cases are counted apart (harness/verdict/outcomes.py)."""
    from harness.verdict.outcomes import status_of

    return status_of(report)


@pytest.fixture(scope="session")
def longlook(request: pytest.FixtureRequest):
    """The example runner (session-scoped: Hypothesis runs many examples per test)."""
    from harness.verdict.runner import Runner
    from harness.testbed.topology import require_namespaces

    if request.config.getoption("--mode") == "real":
        require_namespaces()  # under auto, each real-time case says so (pytest_runtest_setup)
    runner = Runner(Path(request.config.getoption("--artifacts")), request.config.getoption("--keep-passing"))
    request.config._longlook_runner = runner
    return runner


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    runner = getattr(item.config, "_longlook_runner", None)
    if report.when != "call" or runner is None:
        return
    from harness.verdict.outcomes import settle

    settle(report, call, runner.ledgers.get(item.nodeid), item.stash.get(FINDING, None))
    if not report.failed:
        return
    kept = runner.kept.get(item.nodeid)
    if not kept:
        return
    failed, others = kept[-1], kept[:-1]
    from harness.run import replay_command

    files = sorted(p.relative_to(failed) for p in failed.rglob("*") if p.is_file() and not {"www", "downloads"} & set(p.parts))
    listing = "\n".join(f"  {f}" for f in files[:40])
    text = f"minimal failing example: {failed}\n{listing}\nreplay: {replay_command(failed)}"
    if others:
        text += "\nthe other runs behind this verdict:\n" + "\n".join(f"  {d}" for d in others)
    from harness.virtual.recheck import ran_in_virtual_time, recheck_section

    if ran_in_virtual_time(failed):  # under auto, a case's example may have run in either

        text += "\n" + recheck_section(failed, run=not item.config.getoption("--no-real-recheck"))
    report.sections.append(("longlook artifacts", text))


class _Results:
    """--results FILE: gathers each case's report, target, ledger and kept examples
    for harness/results/record.py. Workers (pytest-xdist) build the records and send
    them with their reports; only the controller writes the file."""

    def __init__(self, config: pytest.Config):
        from harness.results.store import ResultsError, Writer

        self.worker = hasattr(config, "workerinput")
        try:
            self.writer = None if self.worker else Writer(Path(config.getoption("--results")))
        except ResultsError as e:
            raise pytest.UsageError(str(e)) from None

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outermost: after outcomes.settle
    def pytest_runtest_makereport(self, item: pytest.Item, call):
        report = (yield).get_result()
        if report.when != "call" and (report.when != "setup" or report.passed):
            return
        from harness.results.record import build
        from harness.virtual.recheck import judged_in

        runner = getattr(item.config, "_longlook_runner", None)
        callspec = getattr(item, "callspec", None)
        report.longlook_record = build(
            report, call.excinfo.value if call.excinfo else None, prop=getattr(item, "originalname", item.name),
            case=getattr(callspec, "id", None), target=getattr(callspec, "params", {}).get("target"),
            mode=judged_in(runner.ledgers.get(item.nodeid) if runner else None, item),
            mode_option=item.config.getoption("--mode"), backend=item.config.getoption("--backend"),
            ledger=runner.ledgers.get(item.nodeid) if runner else None,
            kept=runner.kept.get(item.nodeid, []) if runner else [])

    def pytest_runtest_logreport(self, report) -> None:
        record = getattr(report, "longlook_record", None)
        if record is not None and self.writer is not None:
            self.writer.append(record)
