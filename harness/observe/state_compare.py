"""How far inferred congestion states agree with the ones a stack logged.

The inference (harness.observe.states) is validated on the stacks that log states:
strip them, infer, compare. Stacks log different sets of states, so both sides are
mapped to a common coarse set first, and `LOGGED_VOCABULARY` says which coarse states
each stack can express at all. Times are µs; agreement is a fraction of time.
"""

from __future__ import annotations

from typing import Any, Sequence

from harness.observe.events import CongestionState

#: The states every stack can be compared in (see `agreement`).
COARSE = ("SlowStart", "CongestionAvoidance", "Recovery", "ApplicationLimited")

#: Which coarse state each model state stands for; None: the state in force before it
#: (a PTO does not change the congestion controller's state, RFC 9002 §6.2).
COARSE_OF = {
    "SlowStart": "SlowStart",
    "CongestionAvoidance": "CongestionAvoidance",
    "CongestionAvoidanceMaxed": "CongestionAvoidance",
    "ApplicationLimited": "ApplicationLimited",
    "Recovery": "Recovery",
    "TailLossProbe": None,
    "RetransmissionTimeout": None,
}

#: The coarse states each stack's qlog can express, as measured on its traces:
#: quic-go logs slow_start, congestion_avoidance, recovery, application_limited;
#: picoquic's newreno logs 0/1 (slow start / avoidance), its cubic was seen going 0 → 2
#: directly (its "1", recovery, never logged across many losses), app_limited only as a
#: metric; quiche logs "recovery" for tens of µs before "congestion_avoidance" (a
#: congestion event, not a period) and app-limited only as cf_app_limited.
LOGGED_VOCABULARY: dict[str, tuple[str, ...]] = {
    "quic-go": COARSE,
    "picoquic": ("SlowStart", "CongestionAvoidance"),
    "quiche": ("SlowStart", "CongestionAvoidance"),
}


def agreement(logged: Sequence[CongestionState], inferred: Sequence[Any], *,
              vocabulary: tuple[str, ...] = COARSE, start_us: float | None = None,
              end_us: float | None = None) -> float:
    """Fraction of the time (0..1) in which ``logged`` and ``inferred`` name the same
    coarse state. Arguments and errors as for `disagreements`."""
    start, end = _window(logged, inferred, start_us, end_us)
    gaps = disagreements(logged, inferred, vocabulary=vocabulary, start_us=start, end_us=end)
    return 1.0 - sum(t1 - t0 for t0, t1, _, _ in gaps) / (end - start)


def disagreements(logged: Sequence[CongestionState], inferred: Sequence[Any], *,
                  vocabulary: tuple[str, ...] = COARSE, start_us: float | None = None,
                  end_us: float | None = None) -> list[tuple[float, float, str, str]]:
    """The intervals (t0_us, t1_us, logged state, inferred state) where the coarse views differ.

    Each list is a step function of time, SlowStart before its first entry (a sender
    begins in slow start, RFC 9002 §7.3.1; picoquic logs only changes). ``inferred`` may
    be `states.explain_states` output, whose PTO overlays count as the state beneath
    them; in plain CongestionState lists they count as the state before them (a PTO
    does not change the controller's state, §6.2). The window runs from ``start_us``
    (default: the first entry of either list) to ``end_us`` (default: the last entry;
    pass the trace's end to count the final state). ``vocabulary`` (LOGGED_VOCABULARY)
    is what the stack can express: outside it, Recovery shows as CongestionAvoidance
    (the window sits at ssthresh, §7.3.2), anything else as the state before it.
    Raises ValueError for an empty window, a bad vocabulary or an unknown state.
    """
    if not {"SlowStart", "CongestionAvoidance"} <= set(vocabulary) <= set(COARSE):
        raise ValueError(f"vocabulary must lie within {COARSE} and hold SlowStart and "
                         f"CongestionAvoidance; got {vocabulary}")
    start, end = _window(logged, inferred, start_us, end_us)
    a, b = _coarse_steps(logged, vocabulary), _coarse_steps(inferred, vocabulary)
    cuts = sorted({start, end, *(t for t, _ in a + b if start < t < end)})
    out: list[tuple[float, float, str, str]] = []
    ia = ib = 0
    x = y = "SlowStart"
    for t0, t1 in zip(cuts, cuts[1:]):
        while ia < len(a) and a[ia][0] <= t0:
            x, ia = a[ia][1], ia + 1
        while ib < len(b) and b[ib][0] <= t0:
            y, ib = b[ib][1], ib + 1
        if x == y:
            continue
        if out and out[-1][1] == t0 and out[-1][2:] == (x, y):
            out[-1] = (out[-1][0], t1, x, y)
        else:
            out.append((t0, t1, x, y))
    return out


def _window(logged, inferred, start_us, end_us) -> tuple[float, float]:
    times = [_state(s).t_us for s in (*logged, *inferred)]
    start = start_us if start_us is not None else min(times, default=0.0)
    end = end_us if end_us is not None else max(times, default=0.0)
    if end <= start:
        raise ValueError(f"nothing to compare: the window {start}..{end} µs is empty "
                         f"({len(logged)} logged, {len(inferred)} inferred states)")
    return start, end


def _state(s: Any) -> CongestionState:
    """The CongestionState of a logged state or of a states.Inference."""
    return s if isinstance(s, CongestionState) else s.state


def _coarse_steps(states: Sequence[Any], vocabulary: tuple[str, ...]) -> list[tuple[float, str]]:
    """(t_us, coarse state) steps, each state mapped as `disagreements` describes."""
    steps: list[tuple[float, str]] = []
    prev = "SlowStart"
    for item in sorted(states, key=lambda s: _state(s).t_us):
        s = _state(item)
        name = s.state if isinstance(item, CongestionState) else item.base
        if name not in COARSE_OF:
            raise ValueError(f"unknown congestion state {name!r} at {s.t_us} µs; known: {', '.join(COARSE_OF)}")
        c = COARSE_OF[name] or prev
        if c not in vocabulary:
            c = "CongestionAvoidance" if c == "Recovery" else prev
        steps.append((s.t_us, c))
        prev = c
    return steps
