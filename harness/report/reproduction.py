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


def _cells(recs: list[dict]) -> dict:
    ok = [r for r in recs if r.get("ok")]
    modes = sorted({r.get("mode", "?") for r in recs})
    cell = {"runs": len(recs), "failed": len(recs) - len(ok), "mode": "/".join(modes)}
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
        groups.setdefault((r["x"], f"{r['stack']}-{r['cc']}"), []).append(r)
    return {k: _cells(v) for k, v in groups.items()}


def _fmt(cell: dict) -> str:
    if "time" not in cell:
        return f"failed ×{cell['failed']} ({cell['mode']})"
    spread = (f" [{cell['rate_min']:.2f}–{cell['rate_max']:.2f}, sd {cell['rate_sd']:.2f}]"
              if cell["runs"] - cell["failed"] > 1 else "")
    failed = f", {cell['failed']} failed" if cell["failed"] else ""
    return f"{cell['time']:.2f} s {cell['rate']:.2f} Mbit/s{spread} ({cell['mode']}, n={cell['runs']}{failed})"


def markdown(e: Experiment, records: list[dict]) -> str:
    """The table in Markdown: one row per point, the published columns first."""
    cells = summarise(e, records)
    targets = sorted({t for _, t in cells})
    xs = sorted({x for x, _ in cells})
    protos = sorted({p for pt in e.points for p in pt.published})
    head = [e.axis] + [f"published {p} (s, Mbit/s)" for p in protos] + [f"{t} (median s, Mbit/s)" for t in targets]
    lines = [f"{e.name}: {e.title}", f"source: {e.source}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for x in xs:
        pt = e.point(x)
        row = [f"{x:g}"] + [f"{pt.published[p][0]:g} s, {pt.published[p][1]:g}" if p in pt.published else "–"
                            for p in protos]
        row += [_fmt(cells[(x, t)]) if (x, t) in cells else "–" for t in targets]
        lines.append("| " + " | ".join(row) + " |")
    if e.notes:
        lines += ["", f"note: {e.notes}"]
    return "\n".join(lines)


def plot(e: Experiment, records: list[dict], out_png: Path) -> Path:
    """Goodput against the swept value: each stack's median with its min–max, the
    published points as open markers on the same axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = summarise(e, records)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:
        for t in sorted({t for _, t in cells}):
            pts = sorted((x, c) for (x, tt), c in cells.items() if tt == t and "rate" in c)
            if pts:
                xs = [x for x, _ in pts]
                ax.errorbar(xs, [c["rate"] for _, c in pts],
                            yerr=[[c["rate"] - c["rate_min"] for _, c in pts], [c["rate_max"] - c["rate"] for _, c in pts]],
                            marker="o", capsize=3, label=f"{t} (today)")
        for proto in sorted({p for pt in e.points for p in pt.published}):
            pts = [(pt.x, pt.published[proto][1]) for pt in e.points if proto in pt.published]
            ax.plot([x for x, _ in pts], [y for _, y in pts], linestyle="--", marker="s", fillstyle="none",
                    label=f"{proto} (published)")
        ax.set_xlabel(e.axis)
        ax.set_ylabel("goodput, Mbit/s")
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
