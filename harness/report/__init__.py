"""Reports a human opens after a run: the cwnd plot and the state-transition diagram.

`plots.plot_cwnd` draws congestion window, bytes in flight and ssthresh over time with
losses, real drops, reorders, phase changes and the congestion states (logged and
inferred) marked, in the style of Kakhki et al., IMC'17, Fig. 5. `diagram.state_diagram`
draws the states visited and the transitions taken with their counts (their Fig. 3),
as graphviz DOT and PNG. Both read the normalised event model (harness.observe.events).
"""

from __future__ import annotations

#: One colour per congestion state, shared by the plot's band and the diagram's nodes
#: (colour-blind-safe Okabe–Ito palette, slow start to timeout from cool to warm).
STATE_COLOURS = {
    "SlowStart": "#56B4E9",
    "CongestionAvoidance": "#009E73",
    "CongestionAvoidanceMaxed": "#F0E442",
    "ApplicationLimited": "#999999",
    "Recovery": "#E69F00",
    "TailLossProbe": "#CC79A7",
    "RetransmissionTimeout": "#D55E00",
}


def write_report(trace, out_dir, *, beta: float | None, mss: int, ground_truth=None, name: str | None = None,
                 title: str | None = None) -> dict:
    """Everything for one connection into ``out_dir``: the cwnd plot and the state
    diagrams (inferred, and logged when the stack logs states). Returns the paths by
    kind: "plot", "inferred_dot", "inferred_png", "logged_dot", "logged_png".

    ``trace`` is a harness.observe.events.Trace of the data sender; ``beta`` and ``mss``
    go to harness.observe.states.infer_states; ``ground_truth`` is a GroundTruth or
    the path of the emulator's log. This is what `longlook transfer --out` calls.
    """
    # Imported here: matplotlib and graphviz load only when a report is written.
    from pathlib import Path

    from harness.observe.events import CongestionState
    from harness.observe.states import infer_states, strip_states
    from harness.report.diagram import state_diagram
    from harness.report.plots import plot_cwnd

    out = Path(out_dir)
    stem = name or f"{trace.stack}-{trace.vantage}"
    inferred = infer_states(strip_states(trace), beta=beta, mss=mss)
    end_us = max((e.t_us for e in trace.events), default=None)
    paths = {"plot": plot_cwnd(trace, ground_truth, out_png=out / f"{stem}-cwnd.png", inferred=inferred, title=title)}
    logged = [s for s in trace.of(CongestionState) if not s.inferred]
    for kind, states in (("inferred", inferred), ("logged", logged)):
        if states:
            dot, png = state_diagram(states, out, name=f"{stem}-states-{kind}", end_us=end_us,
                                     title=f"{trace.stack} {trace.vantage}: {kind} congestion states")
            paths[f"{kind}_dot"], paths[f"{kind}_png"] = dot, png
    return paths
