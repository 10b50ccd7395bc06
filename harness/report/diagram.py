"""The congestion states a connection went through, as a transition diagram.

In the style of Kakhki et al., IMC'17, Fig. 3: one node per state visited, labelled
with how many times it was entered and the time spent in it; one edge per transition
taken, labelled with how often. An `Init` node points at the first state, as in the
TLA+ model (spec/CongestionControl.tla). Output: graphviz DOT text and a PNG rendered
by graphviz's `dot` (Debian package `graphviz`, scripts/install-system-deps.sh).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import graphviz

from harness.observe.events import STATES, CongestionState
from harness.report import STATE_COLOURS


class DiagramError(RuntimeError):
    """The PNG could not be rendered; the message says how to fix it."""


@dataclass(frozen=True)
class Visits:
    """Counts behind a diagram: entries per state, transitions per (from, to), and
    time per state in µs (the last state's only when the end is known)."""

    entries: Counter
    transitions: Counter
    time_us: dict[str, float]


def count_visits(states: Sequence[CongestionState], end_us: float | None = None) -> Visits:
    """Entries, transitions and time per state of a time-ordered state list.

    Repeats of the same state (a stack re-logging it) are one visit. The first state
    counts as a transition from "Init". ``end_us`` closes the last visit.
    """
    ordered = sorted(states, key=lambda s: s.t_us)
    runs: list[CongestionState] = []
    for s in ordered:
        if not runs or runs[-1].state != s.state:
            runs.append(s)
    entries = Counter(s.state for s in runs)
    transitions = Counter(zip(["Init"] + [s.state for s in runs], [s.state for s in runs]))
    time_us: dict[str, float] = {}
    for s, nxt in zip(runs, runs[1:] + [None]):
        t1 = nxt.t_us if nxt is not None else end_us
        if t1 is not None:
            time_us[s.state] = time_us.get(s.state, 0.0) + max(0.0, t1 - s.t_us)
    return Visits(entries, transitions, time_us)


def to_dot(states: Sequence[CongestionState], *, end_us: float | None = None, title: str | None = None) -> str:
    """The DOT text of the diagram (deterministic: states in events.STATES order)."""
    v = count_visits(states, end_us)
    g = graphviz.Digraph("congestion_states", graph_attr={"rankdir": "LR", "fontname": "Helvetica",
                                                         "label": title or "", "labelloc": "t", "dpi": "110"})
    g.attr("node", fontname="Helvetica", fontsize="11", style="filled,rounded", shape="box")
    g.attr("edge", fontname="Helvetica", fontsize="10")
    g.node("Init", "Init", shape="circle", style="filled", fillcolor="#DDDDDD", fontsize="9")
    for name in [s for s in STATES if s in v.entries] + sorted(set(v.entries) - set(STATES)):
        g.node(name, _node_label(name, v), fillcolor=_pale(STATE_COLOURS.get(name, "#FFFFFF")),
               color=STATE_COLOURS.get(name, "#000000"), penwidth="2")
    top = max(v.transitions.values(), default=1)
    for (a, b), n in sorted(v.transitions.items(), key=lambda kv: (_rank(kv[0][0]), _rank(kv[0][1]))):
        # Width grows with the log of the count so that one busy edge does not swamp the rest.
        width = 1 + 2.5 * math.log1p(n) / math.log1p(top)
        g.edge(a, b, label=str(n), penwidth=f"{width:.2f}")
    return g.source


def state_diagram(states: Sequence[CongestionState], out_dir: str | Path, *, name: str = "states",
                  end_us: float | None = None, title: str | None = None) -> tuple[Path, Path]:
    """Write ``name``.dot and ``name``.png into ``out_dir``; return (dot_path, png_path).

    The DOT file is written first, so it is there even when rendering fails; a missing
    `dot` executable raises DiagramError naming the package to install.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dot_path, png_path = out / f"{name}.dot", out / f"{name}.png"
    source = to_dot(states, end_us=end_us, title=title)
    dot_path.write_text(source)
    try:
        png_path.write_bytes(graphviz.Source(source).pipe(format="png"))
    except graphviz.ExecutableNotFound as e:
        raise DiagramError(f"cannot render {png_path}: graphviz's `dot` is not installed "
                           "(apt-get install graphviz, or scripts/install-system-deps.sh)") from e
    except graphviz.CalledProcessError as e:
        raise DiagramError(f"`dot` failed on {dot_path}: {e.stderr!r}") from e
    return dot_path, png_path


def _node_label(name: str, v: Visits) -> str:
    n = v.entries[name]
    label = f"{name}\\n{n} visit{'s' if n != 1 else ''}"
    if name in v.time_us:
        label += f" · {_duration(v.time_us[name])}"
    return label


def _duration(us: float) -> str:
    """µs as a short human duration (s, ms or µs)."""
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    return f"{us / 1e3:.1f} ms" if us >= 1e3 else f"{us:.0f} µs"


def _rank(name: str) -> int:
    return STATES.index(name) if name in STATES else (-1 if name == "Init" else len(STATES))


def _pale(hex_colour: str, keep: float = 0.35) -> str:
    """``hex_colour`` mixed with white, so that labels stay readable on it."""
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    mix = (round(255 - (255 - c) * keep) for c in (r, g, b))
    return "#" + "".join(f"{c:02X}" for c in mix)
