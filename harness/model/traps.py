"""Abstract paths to each model transition, from TLC (directed generation, issue 26).

For a transition (from, action, to) of the bounded model, spec/MCTrap.tla states the
trap property "it never fires"; TLC refutes it breadth-first and its counterexample
is a shortest path of model steps to it. The path to an observable transition takes
no unobservable action on its way (no schedule brings one about, and a trace cannot
confirm it), nor an ECN step unless the transition is one (a sender that marks no
datagram ECT ignores the marks: the path must reach its states on every stack), nor
a capped state unless the transition involves one (coverage.CAP_ONLY_STATES: only a
sender that takes a window cap reaches them), nor an application's pause unless the
transition involves one (coverage.PLAN_ONLY_*: the plan's think time brings those
about, not the link), nor a slow-start exit without a loss or persistent congestion
(SENDER_CHOICE_ACTIONS) unless no other path exists. harness/schedule/directed.py turns a path into an
impairment schedule.

TLC takes a few seconds per transition, so the paths are kept in spec/traps.json with
the hash of the model files they came from: a run reads them and pays nothing. When
the model changes the hash no longer matches and `longlook traps --refresh` (or
`refresh()`) recomputes them; tests/test_traps.py fails on a stale file.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.model import tlavalue, tlc
from harness.model.coverage import (CAP_ONLY_STATES, ECT_ONLY_ACTIONS, PLAN_ONLY_ACTIONS, PLAN_ONLY_STATES, Transition,
                                    model_transitions, observable)
from harness.model.validate import SPEC_DIR

CACHE = SPEC_DIR / "traps.json"
#: The files the paths depend on: the model, its bounds, the trap module.
MODEL_FILES = ("CongestionControl.tla", "MCCongestionControl.tla", "MCTrap.tla", "MCTransitions.cfg")


class StaleTraps(Exception):
    """spec/traps.json was computed from other model files; the message says how to refresh."""


@dataclass(frozen=True)
class Step:
    """One model step of a path: its states, action and packet number (-1: none)."""

    before: str
    action: str
    after: str
    pn: int

    def to_json(self) -> list:
        return [self.before, self.action, self.after, self.pn]


def model_version() -> str:
    """A hash of the model files and of the trap configuration written for them (its
    bounds and avoided actions), so a change to either makes the cache stale."""
    h = hashlib.sha256()
    for name in MODEL_FILES:
        h.update(name.encode() + b"\0" + (SPEC_DIR / name).read_bytes())
    h.update(_config(("From", "Action", "To")).encode() + _config(("From", "OnEcnCe", "To")).encode())
    return h.hexdigest()[:16]


#: Steps a path avoids where another path exists (SENDER_CHOICE_ACTIONS: "choices").
#: A slow start ended by its delay signal (HyStart++) before any loss is a sender's own
#: rule, which no impairment brings about and a sender without it never takes: quinn's
#: NewReno reached 2 of the 11 transitions whose shortest path went that way. And
#: persistent congestion is cheap in the model (no time passes) but dear on the link (a
#: blackhole of several PTO periods), after which a real sender slow-starts again from
#: two datagrams wherever the model's bounded path went on. Avoided, a path leaves slow
#: start by a loss and its recovery period, which every sender takes.
SENDER_CHOICE_ACTIONS = ("OnSlowStartExit", "OnPersistentCongestion")

#: MCTransitions prints an edge before its bounds prune the step, so the coverage
#: universe holds the steps that leave the bounds by one (a third PTO expiry in a
#: row: RetransmissionTimeout → RetransmissionTimeout). The trap's model allows one
#: more expiry so those have paths too.
EXTRA_PTO = 1


def _config(t: Transition, choices: bool = False) -> str:
    """MCTransitions.cfg's bounds (one more PTO), the trap's constants, the trap
    invariant. `choices`: the path may take SENDER_CHOICE_ACTIONS on its way."""
    bounds = []
    for ln in (SPEC_DIR / "MCTransitions.cfg").read_text().splitlines():
        m = re.match(r"CONSTANT MaxPto = (\d+)", ln)
        if m:
            bounds.append(f"CONSTANT MaxPto = {int(m.group(1)) + EXTRA_PTO}")
        elif ln.startswith("CONSTANT"):
            bounds.append(ln)
    # A path to an observable transition takes no step only some runs can bring about
    # (an ECN mark, an application's pause) and passes through no state only some
    # senders reach (a capped window) on its way, unless the transition is one: it
    # reaches its transition by link impairments alone, on every sender.
    plan_only = set(t) & {*PLAN_ONLY_STATES, *PLAN_ONLY_ACTIONS}
    avoided = [*(a for a in ECT_ONLY_ACTIONS if a != t[1]), *([] if plan_only else PLAN_ONLY_ACTIONS),
               *(a for a in ([] if choices else SENDER_CHOICE_ACTIONS) if a != t[1])]
    avoid = "{}" if not observable(t) else "{" + ", ".join(f'"{a}"' for a in avoided) + "}"
    states = [s for s in CAP_ONLY_STATES if s not in t] if observable(t) else []
    avoid_states = "{" + ", ".join(f'"{s}"' for s in states) + "}"
    return "\n".join([*bounds, f'CONSTANT TrapFrom = "{t[0]}"', f'CONSTANT TrapAction = "{t[1]}"',
                      f'CONSTANT TrapTo = "{t[2]}"', f"CONSTANT TrapAvoid = {avoid}",
                      f"CONSTANT TrapAvoidStates = {avoid_states}", "INIT TrapInit", "NEXT TrapNext",
                      "INVARIANT NotReached", ""])


_STATE = re.compile(r"^State \d+: ", re.M)
_LAST = re.compile(r"^/\\ last = (.*?)(?=^/\\ |\Z)", re.M | re.S)


def path_to(t: Transition) -> list[Step] | None:
    """A shortest model path ending in transition `t` (TLC) that avoids the sender's
    own choices if any does (SENDER_CHOICE_ACTIONS), or None if the bounded model
    never takes it."""
    return _path_to(t, choices=False) or _path_to(t, choices=True)


def _path_to(t: Transition, choices: bool) -> list[Step] | None:
    with tempfile.TemporaryDirectory(prefix="longlook-trap-") as d:
        for f in SPEC_DIR.glob("*.tla"):
            shutil.copy(f, d)
        (Path(d) / "MCTrap.cfg").write_text(_config(t, choices))
        result = tlc.run(Path(d), "MCTrap", quick=True, timeout_s=300)
    if result.error is None:
        return None
    if "NotReached" not in result.error:
        raise tlc.TlcError(f"trap for {t}: TLC reported {result.error!r}, not the trap")
    steps = []
    for block in _STATE.split(result.output)[2:]:  # [0] is TLC's preamble, [1] the initial state
        m = _LAST.search(block)
        if m is None:
            raise tlc.TlcError(f"trap for {t}: a state of TLC's counterexample has no `last`")
        v = tlavalue.parse(" ".join(m.group(1).split()))
        steps.append(Step(v["from"], v["action"], v["to"], v["pn"]))
    if not steps or (steps[-1].before, steps[-1].action, steps[-1].after) != tuple(t):
        raise tlc.TlcError(f"trap for {t}: TLC's counterexample does not end in it: {steps[-1:]}")
    return steps


def refresh(path: Path = CACHE, progress=print, workers: int = 2) -> dict[Transition, list[Step] | None]:
    """Recomputes every transition's path (TLC, seconds each; `workers` at once) into `path`."""
    from concurrent.futures import ThreadPoolExecutor

    model = sorted(model_transitions())
    paths = {}
    with ThreadPoolExecutor(workers) as pool:  # each TLC is its own JVM process
        for i, (t, p) in enumerate(zip(model, pool.map(path_to, model)), 1):
            progress(f"[{i}/{len(model)}] {' '.join(t)}: {len(p) if p else 'no'} steps")
            paths[t] = p
    path.write_text(json.dumps({"model_version": model_version(),
                                "paths": {"|".join(t): p and [s.to_json() for s in p] for t, p in paths.items()}},
                               indent=0, sort_keys=True) + "\n")
    return paths


def load(path: Path = CACHE) -> dict[Transition, list[Step]]:
    """The cached paths (transitions the model never takes left out); raises
    StaleTraps when the model files changed since they were computed."""
    if not path.exists():
        raise StaleTraps(f"{path} does not exist: run `longlook traps --refresh` (TLC, a few minutes)")
    data = json.loads(path.read_text())
    if data.get("model_version") != model_version():
        raise StaleTraps(f"{path} was computed from another version of the model ({data.get('model_version')}, "
                         f"now {model_version()}): run `longlook traps --refresh` and commit it")
    return {tuple(k.split("|")): [Step(*s) for s in v] for k, v in data["paths"].items() if v}
