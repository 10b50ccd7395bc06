"""Model coverage: which abstract transitions of the TLA+ model the runs reached.

A transition is (state, action, state'), with states as CongestionControl's CcState
(Init, SlowStart, …) and actions as its action names: not concrete window values.
The model's own transitions come from TLC on spec/MCTransitions.tla (the bounded
model, each edge printed once); a run's come from trace validation (each matched
record prints the step it took). Properties record each validated run under
<artifacts>/model-coverage/<target>.ndjson; `longlook coverage` reports them.

Guidance: `novelty()` counts the transitions an example reached that no earlier
example of the session had, for hypothesis.target; `pending()` names the observable
ones the current target has not reached yet, which directed generation draws from
(harness/schedule/directed.py).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.model import tlavalue, tlc
from harness.model.validate import SPEC_DIR, Verdict

Transition = tuple[str, str, str]
#: Why a transition of the model is not observable in a trace, so it is reached
#: only by TLC. (PTO expiries are: logged, or derived from the capture for a stack
#: that logs none, harness/observe/probes.py; app-limited periods from the
#: capture's STREAM frames, harness/observe/appdata.py.)
_BEFORE_DATA = ("a sender is marked application limited only after it sent the last byte of a response "
                "(harness/observe/appdata.py), never before its first packet")
_LOSS_FIRST = ("persistent congestion follows the losses of the same ACK, and a loss ends an application-limited "
               "period (the spec's OnPacketsLost) that a trace begins again only after the application's next response "
               "ends (harness/model/tracefile.py), never inside that ACK")
UNOBSERVABLE: dict[Transition, str] = {
    ("Init", "SetAppLimited", "Init"): _BEFORE_DATA,
    ("Init", "OnPacketSent", "ApplicationLimited"): _BEFORE_DATA,
    ("ApplicationLimited", "OnPersistentCongestion", "ApplicationLimited"): _LOSS_FIRST,
    ("Recovery", "OnPersistentCongestion", "ApplicationLimited"): _LOSS_FIRST,
}
#: Reached through the plan's pauses (a client's think time between requests), not
#: through the link: a directed path to any other transition takes none of these
#: steps, and harness/schedule/directed.py maps none of them (UNMAPPED).
PLAN_ONLY_STATES = ("ApplicationLimited",)
PLAN_ONLY_ACTIONS = ("SetAppLimited",)
#: Observable, but only on a sender that marks its datagrams ECT (quinn, quic-go,
#: picoquic, s2n-quic; not aioquic, quiche or tquic): the trace's "ecn" records come
#: from the capture's ACK_ECN counts and the link's CE marks (harness/verdict/ecn.py).
#: A directed path to any other transition takes none of these steps, so that it
#: reaches the same states on every stack (harness/model/traps.py).
ECT_ONLY_ACTIONS = ("OnEcnCe",)
#: Observable, but only on a sender whose endpoint takes a window cap (caps.json
#: honours.max_window: aioquic) in a run whose plan sets one (window_cap): trace
#: validation gives the cap to the model as MaxWindow, and a window held at it is
#: CongestionAvoidanceMaxed. The model conformance property draws caps for those.
CAP_ONLY_STATES = ("CongestionAvoidanceMaxed",)


@lru_cache(maxsize=1)
def model_transitions() -> frozenset[Transition]:
    """Every transition of the bounded model (TLC, a few seconds; cached)."""
    result = tlc.run(SPEC_DIR, "MCTransitions")
    if not result.ok:
        raise tlc.TlcError(f"MCTransitions failed: {result.error}")
    return frozenset(tuple(tlavalue.parse(v)[1:]) for v in result.printed
                     if re.match(r'<<\s*"edge"', v))  # TLC pads long tuples: << "edge", …


def observable(t: Transition) -> bool:
    return tuple(t) not in UNOBSERVABLE


def why_unobservable(t: Transition) -> str | None:
    """The reason `t` cannot be seen in a trace, or None when it can."""
    return UNOBSERVABLE.get(tuple(t))


def unobservable_lines() -> list[str]:
    """One line per transition that is not observable, with its reason."""
    return [f"{' → '.join((t[0], t[1], t[2]))}: {why}" for t, why in sorted(UNOBSERVABLE.items())]


def transitions(verdict: Verdict) -> Counter[Transition]:
    """How often the run took each transition (matched records only)."""
    return Counter((s.state, s.action, s.after) for s in verdict.steps)


#: Per target id, the transitions earlier examples of this session reached.
_seen: dict[str, set[Transition]] = {}
#: The target whose example reported last: the next examples of a test case run on it.
_current: list[str] = []


def novelty(target_id: str, reached: set[Transition]) -> int:
    """Transitions in `reached` not reached before in this session by `target_id`;
    remembers them."""
    _current[:] = [target_id]
    seen = _seen.setdefault(target_id, set())
    new = reached - seen
    seen |= reached
    return len(new)


#: Per target id, what its runs so far said it can show: (ect, takes_cap) as in record().
_flags: dict[str, tuple[bool | None, bool | None]] = {}


def current() -> str | None:
    """The target whose example reported last (None before any did)."""
    return _current[0] if _current else None


def pending() -> set[Transition] | None:
    """The model transitions the current target can show and has not reached this
    session; None before any example reported."""
    if not _current:
        return None
    ect, takes_cap = _flags.get(_current[0], (None, None))
    here = StackCoverage(_current[0], 0, Counter(), ect, takes_cap)
    return {t for t in model_transitions() if here.observable(t)} - _seen.get(_current[0], set())


def record(path: Path, target_id: str, verdict: Verdict, schedule: dict | None = None, *,
           ect: bool | None = None, takes_cap: bool | None = None, steered: Transition | None = None) -> None:
    """Appends one validated run to `path` (NDJSON). `ect`: whether the link found
    ECT datagrams to CE-mark where the schedule asked for marks (None: it asked for
    none); `takes_cap`: whether the sender's endpoint takes a window cap. Together
    they say which transitions this target can show at all (StackCoverage.not_here);
    `steered`: the transition the schedule was steered at from an earlier run
    (harness/model/steer.py), None if it was not."""
    path.parent.mkdir(parents=True, exist_ok=True)
    seen = _flags.get(target_id, (None, None))[0]
    _flags[target_id] = (seen if ect is None else (bool(seen) or ect), takes_cap)
    line = {"target": target_id, "accepted": verdict.accepted, "records": verdict.records,
            "matched": verdict.matched, "transitions": [[*t, n] for t, n in sorted(transitions(verdict).items())],
            "schedule": schedule, "ect": ect, "takes_cap": takes_cap} | ({"steered": list(steered)} if steered else {})
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")


#: Why a transition observable in general is not on a given target.
NO_ECT = "its sender marked no datagram ECT where the schedule asked the link for CE marks, so no mark reaches it"
NO_CAP = "its endpoint takes no window cap (caps.json honours.max_window), so no run can hold its window at one"


@dataclass
class StackCoverage:
    target: str
    runs: int
    reached: Counter  # Transition -> times taken
    #: From the runs (record()): True once a run's sender was CE-marked, False when
    #: runs asked for marks and none could be made, None when no run asked.
    ect: bool | None = None
    #: Whether the target's endpoint takes a window cap; None for records older than the field.
    takes_cap: bool | None = None

    def states(self) -> set[str]:
        return {t[0] for t in self.reached} | {t[2] for t in self.reached}

    def not_here(self, t: Transition) -> str | None:
        """Why `t` (observable in general) cannot be shown by this target, or None.
        Only what the runs showed counts: a sender never asked for CE marks keeps the
        ECN transitions as reachable but not reached."""
        if self.ect is False and t[1] in ECT_ONLY_ACTIONS:
            return NO_ECT
        if self.takes_cap is False and any(s in CAP_ONLY_STATES for s in (t[0], t[2])):
            return NO_CAP
        return None

    def observable(self, t: Transition) -> bool:
        return observable(t) and self.not_here(t) is None


def load(paths: list[Path]) -> dict[str, StackCoverage]:
    """Reads model-coverage NDJSON files (or directories of them)."""
    files = [f for p in paths for f in (sorted(p.glob("*.ndjson")) if p.is_dir() else [p])]
    out: dict[str, StackCoverage] = {}
    for f in files:
        for ln in f.read_text().splitlines():
            d = json.loads(ln)
            cov = out.setdefault(d["target"], StackCoverage(d["target"], 0, Counter()))
            cov.runs += 1
            if d.get("ect") is not None:
                cov.ect = bool(cov.ect) or d["ect"]
            if d.get("takes_cap") is not None:
                cov.takes_cap = d["takes_cap"]
            for s, a, s2, n in d["transitions"]:
                cov.reached[(s, a, s2)] += n
    return out


def table(model: frozenset[Transition], stacks: dict[str, StackCoverage]) -> str:
    """Markdown: one row per model transition, one column per target."""
    names = sorted(stacks)
    rows = ["| from | action | to | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
    for t in sorted(model, key=lambda t: (not observable(t), t)):
        cells = [str(stacks[n].reached.get(t, "")) or _blank(stacks[n], t) for n in names]
        rows.append(f"| {t[0]} | {t[1]} | {t[2]} | " + " | ".join(cells) + " |")
    for n in names:
        rows.append("\n" + summary_line(model, stacks[n]))
    rows.append("\nnot observable (n/o), and why:")
    rows += [f"- {line}" for line in unobservable_lines()]
    rows.append(f"\nnot observable on that target (—): {NO_ECT} (ECN), or {NO_CAP} (cap)")
    rows.append(f"\n{', '.join(ECT_ONLY_ACTIONS)}: observable where the sender marks its datagrams ECT and the "
                "link CE-marks some (ACK_ECN counts in the capture); never reached on a sender that does not")
    rows.append(f"\n{', '.join(CAP_ONLY_STATES)}: observable where the sender's endpoint takes a window cap "
                "(caps.json honours.max_window) and the run sets one; never reached on a sender that does not")
    return "\n".join(rows)


def _blank(cov: StackCoverage, t: Transition) -> str:
    if not observable(t):
        return "n/o"
    return "—" if cov.not_here(t) else "·"


def summary_line(model: frozenset[Transition], cov: StackCoverage) -> str:
    """One target's count: reached of what it can show, and what it cannot, with why."""
    here = [t for t in model if cov.observable(t)]
    hit = [t for t in here if cov.reached.get(t)]
    extra = [t for t in cov.reached if t not in model]
    why = Counter("ECN" if cov.not_here(t) == NO_ECT else "cap" for t in model if observable(t) and cov.not_here(t))
    nowhere = sum(1 for t in model if not observable(t))
    gone = len(model) - len(here)
    return (f"{cov.target}: {cov.runs} run{'' if cov.runs == 1 else 's'}, {len(hit)} of {len(here)} model transitions observable on it "
            f"({100 * len(hit) // max(len(here), 1)}%); {gone} of {len(model)} not observable on it "
            f"({100 * gone // max(len(model), 1)}%: {nowhere} on any stack"
            + "".join(f", {k} for {why[k]}" for k in sorted(why)) + ")"
            + (f"; {len(extra)} outside the bounded model: {sorted(extra)[:5]}" if extra else ""))


def dot(model: frozenset[Transition], reached: Counter) -> str:
    """Graphviz source: model states, edges labelled by action; reached edges green
    with their count, unreached grey, unobservable dashed."""
    lines = ["digraph model {", "  rankdir=LR; node [shape=box, fontname=Helvetica]; edge [fontname=Helvetica, fontsize=9];"]
    for t in sorted(model):
        n = reached.get(t, 0)
        style = ('color="forestgreen", penwidth=2' if n else 'color="grey70", fontcolor="grey50"') + \
            ("" if observable(t) else ", style=dashed")
        label = f"{t[1]}" + (f" ×{n}" if n else "")
        lines.append(f'  "{t[0]}" -> "{t[2]}" [label="{label}", {style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def report(paths: list[Path], out_dir: Path | None) -> str:
    """`longlook coverage`: the table, and per target a .dot (and .svg when
    Graphviz's dot is installed) in `out_dir`."""
    stacks = load([p for p in paths if p.exists()])
    if not stacks:
        raise FileNotFoundError(f"no model coverage recorded under {', '.join(map(str, paths))}; run the "
                                "properties first (make check), which record it under <artifacts>/model-coverage/")
    model = model_transitions()
    text = table(model, stacks)
    if out_dir is not None:
        import shutil
        import subprocess

        out_dir.mkdir(parents=True, exist_ok=True)
        for name, cov in stacks.items():
            path = out_dir / f"{name}.dot"
            path.write_text(dot(model, cov.reached))
            if shutil.which("dot"):
                subprocess.run(["dot", "-Tsvg", str(path), "-o", str(path.with_suffix(".svg"))], check=False)
        text += f"\n\ndiagrams: {out_dir}/<target>.dot" + (" and .svg" if shutil.which("dot") else "")
    return text
