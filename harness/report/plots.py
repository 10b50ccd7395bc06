"""The congestion window over time, with what the link did marked (Kakhki et al. Fig. 5).

One PNG per connection: cwnd, bytes in flight and ssthresh (kB) against time (s since
the link started, the trace's and the ground truth's common time base). Declared
losses are crosses on the cwnd line (hollow when the packet was in fact delivered, i.e.
the declaration was spurious); the emulator's real drops are triangles along the top
edge and reordered or held packets triangles along the bottom edge, both from the
ground-truth log; schedule phase changes are vertical lines. A band underneath shows
the congestion states, the stack's logged ones above its inferred ones, so that a
reader sees where they differ.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any, Iterable, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: no display on the test machines, and no GUI toolkit
import matplotlib.pyplot as plt  # noqa: E402 (the backend must be chosen first)
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from harness.observe.groundtruth import GroundTruth, read_log  # noqa: E402
from harness.observe.events import CongestionState, Metrics, PacketLost, SpuriousLoss, Trace  # noqa: E402
from harness.report import STATE_COLOURS  # noqa: E402

#: Ground-truth marks that mean a packet arrived later than its successors could.
REORDER_MARKS = ("held", "extra_delay", "reordered_by_jitter")
#: Marker colour per drop reason (the emulator's DROP_REASONS).
DROP_COLOURS = {"queue_full": "#7B3294", "blackhole": "#444444", "loss_iid": "#000000",
                "loss_ge": "#000000", "loss_index": "#B2182B", "malformed": "#B2182B"}
KB = 1000.0


#: Resolution of the PNG (dots per inch of the 12.5 × 6.2 inch figure).
DPI = 120


def plot_cwnd(trace: Trace, ground_truth: GroundTruth | str | Path | None = None,
              phases: Sequence[Any] | None = None, *, out_png: str | Path,
              inferred: Sequence[CongestionState] | None = None, spurious: Iterable[int] = (),
              title: str | None = None) -> Path:
    """Draw ``trace`` into ``out_png`` (see `cwnd_figure`) and return its path."""
    fig = cwnd_figure(trace, ground_truth, phases, inferred=inferred, spurious=spurious, title=title)
    try:
        out = Path(out_png)
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=DPI)
    finally:
        plt.close(fig)  # pyplot keeps every open figure alive otherwise
    return out


def cwnd_figure(trace: Trace, ground_truth: GroundTruth | str | Path | None = None,
                phases: Sequence[Any] | None = None, *, inferred: Sequence[CongestionState] | None = None,
                spurious: Iterable[int] = (), title: str | None = None):
    """The figure of ``trace`` (the caller closes it): the window axes first, the
    state band second.

    ``ground_truth`` is a parsed log (harness.observe.groundtruth.read_log) or its path; its
    records in the trace's sending direction (server → s2c) give real drops and
    reorders, its header's schedule the phases unless ``phases`` is given (start times
    in µs, or objects/dicts with ``start_us``). ``inferred`` are inferred states (default:
    those in the trace marked inferred); ``spurious`` packet numbers whose declared loss
    was wrong (from the ground-truth join), drawn hollow, like the trace's own
    SpuriousLoss events. Raises ValueError if the trace has no congestion window.
    """
    if isinstance(ground_truth, (str, Path)):
        ground_truth = read_log(ground_truth)
    series = _series(trace)
    if not series["congestion_window"][0]:
        raise ValueError(f"{trace.source}: no congestion_window in the trace's metrics; nothing to plot")
    logged = [s for s in trace.of(CongestionState) if not s.inferred]
    if inferred is None:
        inferred = [s for s in trace.of(CongestionState) if s.inferred]
    bands = [(name, states) for name, states in (("logged", logged), ("inferred", list(inferred))) if states]
    fig, (ax, band) = plt.subplots(2, 1, sharex=True, figsize=(12.5, 6.2),
                                   gridspec_kw={"height_ratios": [6, 0.45 + 0.35 * len(bands)]})
    try:
        _draw_windows(ax, series)
        _draw_losses(ax, trace, series, set(spurious))
        if ground_truth is not None:
            _draw_link(ax, ground_truth, "s2c" if trace.vantage == "server" else "c2s")
        starts = _phase_starts(phases, ground_truth)
        _draw_phases((ax, band), starts, ax)
        _draw_bands(band, bands, max(e.t_us for e in trace.events) / 1e6)
        _decorate(ax, band, title or f"{trace.stack} {trace.vantage}: congestion window over time")
        _legend(ax, band, bands, bool(starts))
        fig.tight_layout()
    except BaseException:
        plt.close(fig)
        raise
    return fig


def _decorate(ax, band, title: str) -> None:
    ax.set_ylabel("kB")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.25)
    band.set_xlabel("time since link start (s)")
    ax.set_title(title, fontsize=11, pad=16)


def _series(trace: Trace) -> dict[str, tuple[list[float], list[float]]]:
    """(times in s, values in kB) of each window metric, where the trace logged it."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for name in ("congestion_window", "bytes_in_flight", "ssthresh"):
        ts: list[float] = []
        vs: list[float] = []
        for m in trace.of(Metrics):
            v = getattr(m, name)
            if v is not None and v < 2**40:  # no "infinite" ssthresh sentinels on the axis
                ts.append(m.t_us / 1e6)
                vs.append(v / KB)
        out[name] = (ts, vs)
    return out


def _value_at(series: tuple[list[float], list[float]], t_s: float) -> float:
    ts, vs = series
    i = bisect.bisect_right(ts, t_s)
    return vs[i - 1] if i else (vs[0] if vs else 0.0)


def _draw_windows(ax, series) -> None:
    ts, vs = series["bytes_in_flight"]
    if ts:
        ax.step(ts, vs, where="post", color="#BBBBBB", lw=0.8, label="bytes in flight")
    ts, vs = series["ssthresh"]
    if ts:
        ax.step(ts, vs, where="post", color="#117733", lw=1.2, ls="--", label="ssthresh")
    ts, vs = series["congestion_window"]
    ax.step(ts, vs, where="post", color="#0072B2", lw=1.6, label="cwnd")


def _draw_losses(ax, trace: Trace, series, spurious: set[int]) -> None:
    """Declared losses on the cwnd line; hollow where the declaration was spurious."""
    spurious = spurious | {e.pn for e in trace.of(SpuriousLoss) if e.space == "application"}
    lost = [e for e in trace.of(PacketLost) if e.space == "application"]
    for wrong in (False, True):
        pts = [(e.t_us / 1e6, _value_at(series["congestion_window"], e.t_us / 1e6))
               for e in lost if (e.pn in spurious) == wrong]
        if pts:
            ax.scatter(*zip(*pts), marker="x" if not wrong else "o", s=36 if not wrong else 30, zorder=5,
                       color="#CC0000" if not wrong else "none", edgecolors="#CC0000" if wrong else None,
                       label="declared lost (spurious)" if wrong else "declared lost")


def _draw_link(ax, gt: GroundTruth, direction: str) -> None:
    """Real drops along the top edge, reorders along the bottom (data direction, UDP)."""
    records = [r for r in gt.records if r.dir == direction and r.proto == "udp"]
    edge = ax.get_xaxis_transform()  # x in data, y in axes fraction
    by_reason: dict[str, list[float]] = {}
    for r in records:
        if r.fate == "dropped":
            by_reason.setdefault(r.reason or "unknown", []).append(r.arr_us / 1e6)
    for reason, ts in sorted(by_reason.items()):
        ax.scatter(ts, [0.985] * len(ts), transform=edge, marker="v", s=22, clip_on=False, zorder=6,
                   color=DROP_COLOURS.get(reason, "#000000"), label=f"dropped by link ({reason})")
    held = [r.arr_us / 1e6 for r in records if r.fate == "delivered" and set(r.marks) & set(REORDER_MARKS)]
    if held:
        ax.scatter(held, [0.015] * len(held), transform=edge, marker="^", s=26, clip_on=False, zorder=6,
                   color="#E66100", label="reordered / held by link")


def _phase_starts(phases: Sequence[Any] | None, gt: GroundTruth | None) -> list[float]:
    """Start times (µs) of the schedule's phases after the first."""
    if phases is None:
        phases = ((gt.header.get("schedule") or {}).get("phases") or []) if gt is not None else []
    starts = []
    for p in phases:
        if isinstance(p, (int, float)):
            starts.append(float(p))
        elif isinstance(p, dict):
            starts.append(float(p["start_us"]))
        else:
            starts.append(float(p.start_us))
    return sorted(s for s in starts if s > 0)


def _draw_phases(axes, starts: list[float], top) -> None:
    for n, t_us in enumerate(starts, start=1):
        for a in axes:
            a.axvline(t_us / 1e6, color="#555555", ls=":", lw=1.1, zorder=1)
        top.text(t_us / 1e6, 1.025, f" phase {n}", transform=top.get_xaxis_transform(), fontsize=8,
                 va="bottom", ha="left", color="#555555")


def _draw_bands(band, bands: list[tuple[str, list[CongestionState]]], end_s: float) -> None:
    """One row of coloured spans per list of states, first list on top."""
    for row, (_, states) in enumerate(bands):
        y = len(bands) - 1 - row
        ordered = sorted(states, key=lambda s: s.t_us)
        for s, nxt in zip(ordered, ordered[1:] + [None]):
            t0 = s.t_us / 1e6
            t1 = nxt.t_us / 1e6 if nxt is not None else end_s
            if t1 > t0:
                band.broken_barh([(t0, t1 - t0)], (y + 0.1, 0.8), color=STATE_COLOURS.get(s.state, "#000000"))
    band.set_yticks([len(bands) - 1 - i + 0.5 for i in range(len(bands))], [n for n, _ in bands], fontsize=8)
    band.set_ylim(0, max(1, len(bands)))
    band.tick_params(axis="y", length=0)
    for side in ("top", "right", "left"):
        band.spines[side].set_visible(False)


def _legend(ax, band, bands, phases: bool) -> None:
    handles, _ = ax.get_legend_handles_labels()
    seen = {s.state for _, states in bands for s in states}
    states = [Patch(color=STATE_COLOURS[n], label=n) for n in STATE_COLOURS if n in seen]
    if phases:
        handles.append(Line2D([], [], color="#555555", ls=":", label="phase change"))
    # Outside the axes: inside, it would hide the slow-start ramp at the top left.
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    if states:
        band.legend(handles=states, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.9),
                    ncol=len(states), frameon=False)
