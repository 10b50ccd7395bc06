"""A reproduction's table and plot (`longlook reproduce`, harness/reproduce): today's
stacks beside the published figures.

Per point and stack: the median time and goodput over the runs that completed, their
spread (min–max, and the standard deviation where the study reported mean ± sd),
how many runs failed, and the mode that ran them (virtual or real time).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from harness.reproduce.experiments import Experiment
from harness.reproduce.sweep import record_label


def _mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _cells(recs: list[dict]) -> dict:
    ok = [r for r in recs if r.get("ok")]
    modes = sorted({r.get("mode", "?") for r in recs})
    cell = {"runs": len(recs), "failed": len(recs) - len(ok), "mode": "/".join(modes),
            "unsupported": sum(1 for r in recs if r.get("unsupported"))}
    objs = [r["objects_s"] for r in ok if r.get("objects_s")]
    if objs:
        from harness.reproduce.flows import kendall_tau

        # Per run: time to last byte, the median object's completion as a share of it, tau.
        cell["objects"] = [(max(o), statistics.median(o) / max(o), kendall_tau(o)) for o in objs]
    flows = [r["flows_mbps"] for r in ok if r.get("flows_mbps")]
    if flows:
        # Per flow position (the transfer, then the TCP flows largest first): mean, sd.
        cell["flows"] = [_mean_sd([f[i] for f in flows]) for i in range(min(len(f) for f in flows))]
    cpus = [r["cpu_s"] for r in ok if r.get("cpu_s") and r["duration_s"] > 0]
    if cpus:
        # Each side's CPU over the transfer, % of one core (median over the runs).
        durations = [r["duration_s"] for r in ok if r.get("cpu_s") and r["duration_s"] > 0]
        cell["cpu"] = {side: statistics.median(100 * c[side] / d for c, d in zip(cpus, durations))
                       for side in ("client", "server")}
    if ok:
        times = [r["duration_s"] for r in ok]
        rates = [r["goodput_bps"] / 1e6 for r in ok]
        cell.update(time=statistics.median(times), rate=statistics.median(rates), rate_min=min(rates),
                    rate_max=max(rates), rate_sd=statistics.stdev(rates) if len(rates) > 1 else 0.0)
    return cell


def summarise(e: Experiment, records: list[dict]) -> dict[tuple[float, str], dict]:
    """(x, "stack-cc") → cell."""
    groups: dict[tuple[float, str], list[dict]] = {}
    for r in records:
        groups.setdefault((r["x"], record_label(r)), []).append(r)
    return {k: _cells(v) for k, v in groups.items()}


def _failed(cell: dict) -> str:
    """A cell without a result: unsupported (the stack cannot run the point, e.g. a
    window cap its endpoint does not take) or failed, with how many runs."""
    if cell.get("unsupported") and cell["unsupported"] == cell["runs"]:
        return "unsupported"
    return f"failed ×{cell['failed']} ({cell['mode']})"


def _fmt_share(cell: dict) -> str:
    if "flows" not in cell:
        return _failed(cell)
    quic, *tcp = cell["flows"]
    failed = f", {cell['failed']} failed" if cell["failed"] else ""
    return (f"{quic[0]:.2f} ({quic[1]:.2f}) · TCP " + ", ".join(f"{m:.2f} ({sd:.2f})" for m, sd in tcp)
            + f" ({cell['mode']}, n={cell['runs']}{failed})")


def loser_share(cell: dict, rate_bps: int) -> float | None:
    """The lesser of a pair's two mean throughputs as a share of its max-min fair
    share, half the link (Prudentia's measure); None without a result."""
    if "flows" not in cell or len(cell["flows"]) < 2:
        return None
    return min(m for m, _ in cell["flows"][:2]) / (rate_bps / 2e6)


def _fmt_pair(cell: dict, rate_bps: int) -> str:
    share = loser_share(cell, rate_bps)
    if share is None:
        return _failed(cell)
    (a, sa), (b, sb) = cell["flows"][:2]
    failed = f", {cell['failed']} failed" if cell["failed"] else ""
    return f"{a:.2f} ({sa:.2f}) · {b:.2f} ({sb:.2f}) Mbit/s; loser {100 * share:.0f} % ({cell['mode']}, n={cell['runs']}{failed})"


def _fmt_objects(cell: dict) -> str:
    if "objects" not in cell:
        return _failed(cell)
    ttlb, mid, tau = (statistics.median(v[i] for v in cell["objects"]) for i in range(3))
    failed = f", {cell['failed']} failed" if cell["failed"] else ""
    return f"last {ttlb:.2f} s, median object at {mid:.2f} of it, tau {tau:.2f} ({cell['mode']}, n={cell['runs']}{failed})"


def _fmt(cell: dict) -> str:
    if "time" not in cell:
        return _failed(cell)
    spread = (f" [{cell['rate_min']:.2f}–{cell['rate_max']:.2f}, sd {cell['rate_sd']:.2f}]"
              if cell["runs"] - cell["failed"] > 1 else "")
    failed = f", {cell['failed']} failed" if cell["failed"] else ""
    cpu = (f", CPU client {cell['cpu']['client']:.0f} % server {cell['cpu']['server']:.0f} %"
           if "cpu" in cell else "")
    return f"{cell['time']:.2f} s {cell['rate']:.2f} Mbit/s{spread}{cpu} ({cell['mode']}, n={cell['runs']}{failed})"


def markdown(e: Experiment, records: list[dict]) -> str:
    """The table in Markdown: one row per point, the published columns first."""
    head, rows = grid(e, records)
    lines = [f"{e.name}: {e.title}", f"source: {e.source}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    if e.notes:
        lines += ["", f"note: {e.notes}"]
    return "\n".join(lines)


def grid(e: Experiment, records: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The table's head and rows, as text."""
    cells = summarise(e, records)
    targets = sorted({t for _, t in cells})
    xs = sorted({x for x, _ in cells})
    share = e.measure == "share"
    if e.measure == "pairs":
        head = [e.axis, "published"] + [f"{t} (Mbit/s each, mean (sd); the loser's share of half the link)"
                                        for t in targets]
        return head, [[f"{x:g}", "–"] + [_fmt_pair(cells[(x, t)], e.point(x).rate_bps) if (x, t) in cells else "–"
                                          for t in targets] for x in xs]
    if share:
        # The paper's flows in one column, as it lists them; today's transfer first, then its TCP flows.
        head = [e.axis, "published QUIC · TCP flows, Mbit/s mean (sd)"] + [f"{t} · TCP flows" for t in targets]
    else:
        protos = sorted({p for pt in e.points for p in pt.published})
        what = "completions" if e.measure == "objects" else "median s, Mbit/s"
        head = [e.axis] + [f"published {p} (s, Mbit/s)" for p in protos] + [f"{t} ({what})" for t in targets]
    rows = []
    for x in xs:
        pt = e.point(x)
        if share:
            pub = pt.published
            row = [f"{x:g}", f"{pub['QUIC'][0]:g} ({pub['QUIC'][1]:g}) · TCP "
                   + ", ".join(f"{m:g} ({sd:g})" for k, (m, sd) in pub.items() if k != "QUIC") if pub else "–"]
            row += [_fmt_share(cells[(x, t)]) if (x, t) in cells else "–" for t in targets]
        else:
            row = [f"{x:g}"] + [f"{pt.published[p][0]:g} s, {pt.published[p][1]:g}" if p in pt.published else "–"
                                for p in protos]
            fmt = _fmt_objects if e.measure == "objects" else _fmt
            row += [fmt(cells[(x, t)]) if (x, t) in cells else "–" for t in targets]
        rows.append(row)
    return head, rows


def plot(e: Experiment, records: list[dict], out_png: Path) -> Path:
    """Goodput against the swept value: each stack's median with its min–max, the
    published points as open markers on the same axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = summarise(e, records)
    if e.measure == "pairs":
        return _plot_pairs(plt, e, records, out_png)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:
        if e.measure == "share":
            _plot_share(ax, e, cells)
        elif e.measure == "objects":
            _plot_objects(ax, cells)
        for t in ([] if e.measure in ("share", "objects") else sorted({t for _, t in cells})):
            pts = sorted((x, c) for (x, tt), c in cells.items() if tt == t and "rate" in c)
            if pts:
                xs = [x for x, _ in pts]
                ax.errorbar(xs, [c["rate"] for _, c in pts],
                            yerr=[[c["rate"] - c["rate_min"] for _, c in pts], [c["rate_max"] - c["rate"] for _, c in pts]],
                            marker="o", capsize=3, label=f"{t} (today)")
        for proto in ([] if e.measure == "share" else sorted({p for pt in e.points for p in pt.published})):
            pts = [(pt.x, pt.published[proto][1]) for pt in e.points if proto in pt.published]
            ax.plot([x for x, _ in pts], [y for _, y in pts], linestyle="--", marker="s", fillstyle="none",
                    label=f"{proto} (published)")
        ax.set_xlabel(e.axis)
        ax.set_ylabel({"share": "throughput, Mbit/s", "objects": "median object's completion / last"}.get(
            e.measure, "goodput, Mbit/s"))
        ax.set_title(f"{e.name}: {e.title}", fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out_png.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out_png, dpi=110)
    finally:
        plt.close(fig)
    return out_png


def write(e: Experiment, records: list[dict], out: Path) -> str:
    """Writes OUT/<experiment>.md and .png; returns the table and where they are."""
    text = markdown(e, records)
    (out / f"{e.name}.md").write_text(text + "\n")
    png = plot(e, records, out / f"{e.name}.png")
    return f"{text}\n\n{len(records)} runs ({out / 'runs.ndjson'}); table {out / (e.name + '.md')}, plot {png}"


def _plot_share(ax, e: Experiment, cells: dict) -> None:
    """Per stack: the transfer's mean throughput and the mean TCP flow's, with their
    sd; the paper's QUIC and mean TCP flow as open markers."""
    for t in sorted({t for _, t in cells}):
        pts = sorted((x, c["flows"]) for (x, tt), c in cells.items() if tt == t and "flows" in c)
        if not pts:
            continue
        xs = [x for x, _ in pts]
        ax.errorbar(xs, [f[0][0] for _, f in pts], yerr=[f[0][1] for _, f in pts], marker="o", capsize=3,
                    label=f"{t} (today)")
        ax.errorbar(xs, [statistics.fmean(m for m, _ in f[1:]) for _, f in pts], marker="v", capsize=3,
                    linestyle=":", label=f"TCP flow beside {t}, mean (today)")
    if not all(pt.published for pt in e.points):
        return
    xs = [pt.x for pt in e.points]
    ax.plot(xs, [pt.published["QUIC"][0] for pt in e.points], linestyle="--", marker="s", fillstyle="none",
            label="QUIC (published)")
    ax.plot(xs, [statistics.fmean(m for k, (m, _) in pt.published.items() if k != "QUIC") for pt in e.points],
            linestyle="--", marker="^", fillstyle="none", label="TCP flow, mean (published)")


def _plot_pairs(plt, e: Experiment, records: list[dict], out_png: Path) -> Path:
    """Prudentia's heatmap, one per link rate: every participant against every other,
    each square the loser's share of its fair share (%), the same both ways."""
    cells = summarise(e, records)
    pairs: dict[float, dict[frozenset, float]] = {}
    names: set[str] = set()
    for r in records:
        a, b = f"{r['stack']}-{r['cc']}", r["rival"].replace(":", "-")
        names |= {a, b}
        key = f"{a}-vs-{b}"
        share = loser_share(cells.get((r["x"], key), {}), e.point(r["x"]).rate_bps)
        if share is not None:
            pairs.setdefault(r["x"], {})[frozenset((a, b))] = 100 * share
    order = sorted(names)
    xs = sorted({r["x"] for r in records}) or [p.x for p in e.points]
    fig, axes = plt.subplots(1, len(xs), figsize=(4.2 * len(xs) + 1, 4.2), squeeze=False)
    try:
        for ax, x in zip(axes[0], xs):
            grid = [[pairs.get(x, {}).get(frozenset((a, b)), float("nan")) if a != b else float("nan")
                     for b in order] for a in order]
            im = ax.imshow(grid, vmin=0, vmax=100, cmap="RdYlGn")
            for i, row in enumerate(grid):
                for j, v in enumerate(row):
                    if v == v:  # not NaN
                        ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=8)
            ax.set_xticks(range(len(order)), order, rotation=45, ha="right", fontsize=7)
            ax.set_yticks(range(len(order)), order, fontsize=7)
            ax.set_title(f"{x:g} {e.axis}", fontsize=9)
        fig.colorbar(im, ax=axes[0].tolist(), label="loser's share of its fair share, %")
        fig.suptitle(f"{e.name}: {e.title}", fontsize=10)
        out_png.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out_png, dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    return out_png


def _plot_objects(ax, cells: dict) -> None:
    """Per stack: when the median object completed, as a share of the time to last
    byte (0.5: one after another; near 1: round-robin)."""
    for t in sorted({t for _, t in cells}):
        pts = sorted((x, statistics.median(v[1] for v in c["objects"]))
                     for (x, tt), c in cells.items() if tt == t and "objects" in c)
        if pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=f"{t} (today)")
    ax.axhline(0.5, color="#888888", linestyle=":", linewidth=1)
    ax.set_ylim(0, 1.05)


def write_page(out: Path, dirs: list[Path] | None, notes: list[str]) -> int:
    """The report's reproductions.html: each experiment found in the `longlook
    reproduce --out` directories `dirs`, its table and plot. Written always (it says
    how to add them when none were given); returns the number of experiments."""
    from harness.report.html import esc, page, table
    from harness.reproduce import experiments
    from harness.reproduce.sweep import done

    if not dirs:
        (out / "reproductions.html").write_text(page("reproductions", "<p>No reproductions were given: "
                                                     "<code>longlook report … --reproductions DIR</code> adds the "
                                                     "tables of <code>longlook reproduce … --out DIR</code>.</p>"))
        return 0
    by_experiment: dict[str, list[dict]] = {}
    for d in dirs:
        if not (d / "runs.ndjson").exists():
            raise FileNotFoundError(f"--reproductions {d}: no runs.ndjson (give a `longlook reproduce --out` directory)")
        for rec in done(d / "runs.ndjson").values():
            by_experiment.setdefault(rec["experiment"], []).append(rec)
    parts = []
    (out / "reproductions").mkdir(exist_ok=True)
    for name in sorted(by_experiment):
        if name not in experiments.EXPERIMENTS:
            notes.append(f"reproductions: {name} is no experiment of this version; left out")
            continue
        e = experiments.EXPERIMENTS[name]
        head, rows = grid(e, by_experiment[name])
        png = plot(e, by_experiment[name], out / "reproductions" / f"{name}.png")
        parts.append(f'<h2 id="{esc(name)}">{esc(name)}: {esc(e.title)}</h2><p>{esc(e.source)}</p>'
                     + table([head, *rows]) + f"<p><small>{esc(e.notes)}</small></p>"
                     + f'<p><img class="plot" src="reproductions/{esc(png.name)}" alt="{esc(name)}"></p>')
    (out / "reproductions.html").write_text(page("reproductions: the seed studies beside today's stacks",
                                                 "".join(parts) or "<p>No known experiment in the runs given.</p>"))
    return len(parts)
