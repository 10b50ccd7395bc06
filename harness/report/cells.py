"""One page per cell of the matrix (a property on one stack · version · controller):
for each of its cases the outcome, the examples judged, the verdict text, the
deviations with their measured values, the finding, the replay line, the kept
artifacts (qlog for qvis, pcap and pcapng with keys and the key logs for Wireshark,
the schedule) and, when the replayed example holds a qlog, the cwnd plot and state
diagram `longlook transfer` draws (harness/report/outputs.py), made here, after the
verdict, so passing runs never pay for them."""

from __future__ import annotations

import json
from pathlib import Path

from harness.report.html import badge, esc, github_anchor, link, page, rel, slug, table

#: Files of an example directory worth a link, by glob, with what they are for.
ARTIFACTS = (("example.json", "the example (replay input)"), ("schedule.json", "the shrunk schedule"),
             ("verdict.txt", "the verdict"), ("link.ndjson", "the link's ground truth"),
             ("pcap/*-with-keys.pcapng", "capture with keys (Wireshark)"), ("pcap/*.pcap", "capture"),
             ("*/keys.log", "TLS key log"), ("*/qlog/*", "qlog (qvis)"), ("result.json", "the run's record"))
SCHEDULE_CHARS = 4000


def write_cell(cell, out: Path, label: str, findings_doc: Path, doc: dict, plots: bool, notes: list[str]) -> int:
    """Writes the cell's page; returns how many plots it drew."""
    path = out / cell.href
    here = path.parent
    drawn = 0
    parts = [f"<p>{badge(cell.outcome)} · {cell.judged} examples judged over {len(cell.records)} "
             f"case{'s' if len(cell.records) != 1 else ''}</p>"]
    for rec in sorted(cell.records, key=lambda r: r.get("case") or ""):
        parts.append(_case(rec, here, findings_doc, doc))
        kept = [Path(d) for d in rec.get("artifacts") or []]
        if kept:
            if plots and kept[-1].is_dir() and not any(kept[-1].glob("pcap/*-with-keys.pcapng")):
                from harness.report.outputs import embed_secrets

                notes += [f"{kept[-1]}: {n}" for n in embed_secrets(kept[-1])]
            parts.append(_artifacts(kept, here))
            if plots and kept[-1].is_dir():
                html, n = _plots(rec, kept[-1], here / path.stem, here, notes)
                parts.append(html)
                drawn += n
    path.write_text(page(f"{cell.prop} · {label}", "\n".join(parts), depth=1))
    return drawn


def _case(rec: dict, here: Path, findings_doc: Path, doc: dict) -> str:
    ex = rec.get("examples") or {}
    judged = int(ex.get("judged") or 0)
    counts = (f"{judged} judged ({ex.get('failed', 0)} failing), {ex.get('inconclusive', 0)} inconclusive, "
              f"{ex.get('not_exercised', 0)} not exercised")
    if rec["outcome"] == "passed" and judged == 0:
        counts += " — no example was judged: this pass is no verdict"
    rows = [["case", "outcome", "examples", "requirements", "mode · backend", "duration"],
            [esc(rec.get("case") or rec["nodeid"]), badge(rec["outcome"]), esc(counts),
             esc(", ".join(rec.get("requirements") or []) or "—"),
             esc(f"{rec.get('mode')} · {rec.get('backend')}"), esc(f"{rec.get('duration_s', 0):.1f} s")]]
    parts = [f"<h2>{esc(rec.get('case') or rec['nodeid'])}</h2>", table(rows, raw=True),
             f"<p><small>{esc(rec['nodeid'])}</small></p>"]
    if rec.get("reason"):
        parts.append(f"<p>reason: {esc(rec['reason'])}</p>")
    fid = rec.get("finding")
    if fid:
        heading = doc.get(fid, (fid, ""))[0]
        parts.append(f"<p>finding: {link(f'../findings.html#{fid}', fid)} · "
                     f"{link(rel(findings_doc, here) + '#' + github_anchor(heading), 'docs/findings.md')}</p>")
    devs = rec.get("deviations") or []
    if devs:
        drows = [["deviation", "measured", "message"]]
        for d in devs:
            measured = ", ".join(f"{k}={_num(v)}" for k, v in (d.get("measured") or {}).items())
            drows.append([d.get("kind") or f"({d.get('exception')})", measured, d.get("message") or ""])
        parts.append(table(drows))
    if rec.get("verdict"):
        parts.append(f"<h3>verdict</h3><pre>{esc(rec['verdict'])}</pre>")
    if rec.get("replay"):
        parts.append(f"<h3>replay</h3><pre><code>{esc(rec['replay'])}</code></pre>")
    return "\n".join(parts)


def _num(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _artifacts(kept: list[Path], here: Path) -> str:
    parts = ["<h3>artifacts</h3>"]
    for i, d in enumerate(kept):
        role = "the replayed (minimal) example" if i == len(kept) - 1 else "another run behind this verdict"
        if not d.is_dir():
            parts.append(f"<p>{esc(d)} ({role}): no longer on this machine</p>")
            continue
        items = []
        for pattern, what in ARTIFACTS:
            for f in sorted(d.glob(pattern)):
                if f.is_file() and not (pattern == "pcap/*.pcap" and f.suffix != ".pcap"):
                    items.append(f"<li>{link(rel(f, here), str(f.relative_to(d)))} — {esc(what)}</li>")
        parts.append(f"<p>{link(rel(d, here), str(d))} ({role})</p><ul>{''.join(items)}</ul>")
        schedule = d / "schedule.json"
        if i == len(kept) - 1 and schedule.is_file():
            text = schedule.read_text()[:SCHEDULE_CHARS]
            try:
                text = json.dumps(json.loads(text), indent=1)[:SCHEDULE_CHARS]
            except ValueError:
                pass
            parts.append(f"<details><summary>schedule</summary><pre>{esc(text)}</pre></details>")
    return "\n".join(parts)


def _plots(rec: dict, example: Path, img_dir: Path, here: Path, notes: list[str]) -> tuple[str, int]:
    """The cwnd plot and state diagram of the replayed example, when it has a qlog."""
    from harness.report.outputs import plot_example

    try:
        made = plot_example(example, rec.get("stack") or "", img_dir, rec.get("beta"), slug(rec.get("case") or "case"))
    except Exception as e:  # noqa: BLE001 - a stack's odd qlog must not cost the whole report
        notes.append(f"{example}: no plot ({type(e).__name__}: {e})")
        return f"<p>no plot: {esc(type(e).__name__)}: {esc(str(e)[:300])}</p>", 0
    if not made:
        return "<p>no plot: the example holds no server qlog</p>", 0
    imgs = [f'<p><img class="plot" src="{esc(rel(made[k], here))}" alt="{esc(k)}"></p>'
            for k in ("plot", "inferred_png", "logged_png") if k in made]
    return "<h3>congestion window and states</h3>" + "".join(imgs), 1 if "plot" in made else 0
