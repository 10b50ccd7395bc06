"""`longlook report RESULTS… --out DIR`: one static site from the results records
(harness/results) of one run or of several shards, opened from the file system.

    index.html      the matrix: a row per stack · version · controller (and mode or
                    backend where not real/local), a column per property, grouped by
                    the RFC section of the first rule it judges (spec/requirements.toml);
                    each cell its outcome, as a colour and a word, and how many examples
                    were judged: a pass on none is hatched and says "0 judged"
    cells/*.html    a page per cell (harness/report/cells.py): each case's verdict,
                    deviations and measured values, finding, replay line, artifacts,
                    and the failing example's cwnd plot and state diagram
    findings.html   the recorded findings the run met, with docs/findings.md's text
    coverage.html   the requirement catalogue with a column per stack-controller
    pairs.html      the client × server grid: the cases between each two stacks, by
                    which side sent and was judged (harness/report/pairs.py)
    style.css       the only resource the pages load
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.report.html import CSS, COLOURS, esc, github_anchor, link, outcome_class, page, rel, slug, table
from harness.results import OUTCOMES

ROOT = Path(__file__).resolve().parents[2]
FINDINGS_DOC = ROOT / "docs" / "findings.md"
#: Order of the RFCs' column groups; drafts, the suite's own bounds and properties
#: outside the catalogue come after.
RFC_ORDER = {"9002": 0, "9438": 1, "9406": 2}


@dataclass
class Cell:
    prop: str
    row: tuple
    records: list[dict] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        return min((r["outcome"] for r in self.records), key=OUTCOMES.index)

    @property
    def judged(self) -> int:
        return sum(int(r["examples"].get("judged") or 0) for r in self.records)

    @property
    def findings(self) -> list[str]:
        return list(dict.fromkeys(r["finding"] for r in self.records if r.get("finding")))

    @property
    def href(self) -> str:
        return f"cells/{slug(self.prop.removeprefix('test_') + '--' + '-'.join(map(str, self.row)))}.html"


def row_of(rec: dict) -> tuple:
    cc = rec.get("cc") or ""
    if not cc and rec.get("case"):
        cc = rec["case"].split("-", 1)[-1]
    # The mode asked for, not the one each case ran in: under auto a stack's cases run
    # in either, and they belong in one row (each cell says which judged it).
    return (rec.get("stack") or "?", rec.get("version") or "", cc, rec.get("mode_option") or rec.get("mode") or "real",
            rec.get("backend") or "local")


def row_id(row: tuple) -> str:
    return f"{row[0]}-{row[2]}" if row[2] else row[0]


def row_label(row: tuple) -> str:
    stack, version, cc, mode, backend = row
    extra = [w for w, usual in ((mode, "auto"), (backend, "local")) if w != usual]
    return " · ".join(p for p in (f"{stack} {version}".strip(), cc, *extra) if p)


def _section_key(rfc: str, section: str) -> tuple:
    if rfc == "suite":
        return (8, "", 0, ""), "suite's own bounds"
    if rfc.startswith("draft-"):
        return (7, rfc, 0, ""), rfc
    top = section.split(".")[0]
    label = f"RFC {rfc} §{top}" if top.isdigit() else f"RFC {rfc} App. {top}"
    return (RFC_ORDER.get(rfc, 5), rfc, int(top) if top.isdigit() else 99, top), label


def group_of(sections: list) -> tuple[tuple, str]:
    """The column group of a property: the RFC and top section of its first rule."""
    if not sections:
        return (9, "", 0, ""), "not in the catalogue"
    return min((_section_key(str(rfc), str(sec)) for rfc, sec in sections), key=lambda k: k[0])


def build_site(records: list[dict], out: Path, *, sources: list[tuple[str, int]] = (),
               coverage: tuple[list[list[str]], list[list[str]]] | None = None,
               findings_doc: Path = FINDINGS_DOC, plots: bool = True, baseline: list[dict] | None = None,
               model_coverage: Path | None = None, reproductions: list[Path] | None = None,
               progress=None) -> dict:
    """Writes the site into `out`; returns what it made (counts and seconds, and
    with a `baseline` (earlier records) the changes against it). `progress(done,
    total)` is called after each cell's page."""
    from harness.report.cells import write_cell

    t0 = time.monotonic()
    out = Path(out)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    (out / "style.css").write_text(CSS)
    cells: dict[tuple[str, tuple], Cell] = {}
    sections: dict[str, list] = {}
    for rec in records:
        key = (rec["property"], row_of(rec))
        cells.setdefault(key, Cell(*key)).records.append(rec)
        sections.setdefault(rec["property"], rec.get("sections") or [])
    doc = read_findings_doc(findings_doc)
    made = {"records": len(records), "cells": len(cells), "plots": 0, "notes": []}
    for n, cell in enumerate(cells.values(), 1):
        made["plots"] += write_cell(cell, out, row_label(cell.row), findings_doc, doc, plots, made["notes"])
        if progress is not None:
            progress(n, len(cells))
    changes = None
    if baseline is not None:
        from harness.report import baseline as diff

        old: dict[tuple, list[str]] = {}
        for rec in baseline:
            old.setdefault(diff.match_key(rec["property"], row_of(rec)), []).append(rec["outcome"])
        changes = diff.compare(cells, old)
        made["changes"] = changes
        (out / "changes.html").write_text(_changes(cells, changes))
    from harness.report.model_pages import write_model_pages

    modelled = write_model_pages(out, model_coverage, made["notes"])
    from harness.report.reproduction import write_page

    made["reproductions"] = write_page(out, reproductions, made["notes"])
    from harness.report.pairs import write_pairs

    made["pairs"] = write_pairs(out, cells)
    (out / "index.html").write_text(_index(cells, sections, sources, changes, modelled))
    (out / "findings.html").write_text(_findings(cells, doc, findings_doc, out))
    (out / "coverage.html").write_text(_coverage(coverage))
    made["seconds"] = round(time.monotonic() - t0, 2)
    return made


def _index(cells: dict, sections: dict, sources, changes: dict | None = None, modelled: set[str] = frozenset()) -> str:
    rows = sorted({row for _, row in cells})
    groups: dict[tuple, list[str]] = {}
    labels: dict[tuple, str] = {}
    for prop in sorted(sections, key=lambda p: (group_of(sections[p])[0], p)):
        key, label = group_of(sections[prop])
        groups.setdefault(key, []).append(prop)
        labels[key] = label
    head1 = '<tr><th rowspan="2">stack · version · controller</th>' + "".join(
        f'<th class="group" colspan="{len(props)}">{esc(labels[k])}</th>' for k, props in groups.items()) + "</tr>"
    head2 = "<tr>" + "".join(
        f'<th class="prop" title="{esc(_sections_text(sections[p]))}">{esc(p.removeprefix("test_"))}</th>'
        for props in groups.values() for p in props) + "</tr>"
    body = []
    for row in rows:
        name = esc(row_id(row))
        if row_id(row) in modelled:  # its state machine as the runs took it
            from harness.report.model_pages import stack_href

            name = link(stack_href(row_id(row)), row_id(row))
        tds = [f'<th>{name}<br><small>{esc(row_label(row))}</small></th>']
        for props in groups.values():
            for prop in props:
                tds.append(_cell_html(cells.get((prop, row)), (changes or {}).get((prop, row))))
        body.append("<tr>" + "".join(tds) + "</tr>")
    counts = {o: sum(c.outcome == o for c in cells.values()) for o in OUTCOMES}
    zero = sum(c.outcome == "passed" and c.judged == 0 for c in cells.values())
    summary = esc(", ".join(f"{n} {o}" for o, n in counts.items() if n) + (
        f" ({zero} of the passes on 0 judged examples)" if zero else ""))
    legend = " ".join(f'<span class="badge {outcome_class(o)}">{esc(o)}</span>' for o in COLOURS)
    src = table([["results file", "records"], *[[f, str(n)] for f, n in sources]]) if sources else ""
    if changes is not None:
        from harness.report.baseline import summary as change_summary

        summary += f'; against the baseline: {change_summary(changes)} (<a href="changes.html">changes</a>)'
    body_html = (f"<p>{len(cells)} cells: {summary}.</p>"
                 f'<p class="legend">{legend} · hatched: passed with 0 examples judged (no verdict) · '
                 f"each cell: its outcome and how many examples were judged; click for the evidence.</p>"
                 f'<table class="matrix">{head1}{head2}{"".join(body)}</table>{src}')
    return page("longlook conformance matrix", body_html)


def _cell_html(cell: Cell | None, change=None) -> str:
    if cell is None:
        return '<td class="none">—</td>'
    outcome, judged = cell.outcome, cell.judged
    zero = outcome == "passed" and judged == 0
    cls = f"cell {outcome_class(outcome)}" + (" zero" if zero else "") + (f" {change.kind}" if change else "")
    extra = f"<small>{esc(', '.join(cell.findings))}</small>" if cell.findings else ""
    cases = f"<small>{len(cell.records)} cases</small>" if len(cell.records) > 1 else ""
    modes = "+".join(dict.fromkeys(m for r in cell.records for m in str(r.get("mode") or "real").split("+")))
    title = "passed with no example judged: no verdict" if zero else f"{outcome}, {judged} examples judged"
    return (f'<td class="{cls}" title="{esc(title)}, {esc(modes)} time"><a href="{esc(cell.href)}">{esc(outcome)}'
            f'<span class="judged">{judged} judged</span>{extra}{cases}<small>{esc(modes)}</small>'
            f'{_was(change)}</a></td>')


def _was(change) -> str:
    if change is None:
        return ""
    text = "new" if change.kind == "new" else f"{change.kind}: was {change.was}"
    return f'<small class="was">{esc(text)}</small>'


def _changes(cells: dict, changes: dict) -> str:
    """changes.html: every cell whose outcome differs from the baseline's, worst first."""
    order = ("regression", "changed", "improvement", "new")
    rows = [["change", "property", "stack · version · controller", "was", "now"]]
    for (prop, row), c in sorted(changes.items(), key=lambda kv: (order.index(kv[1].kind), kv[0][0], kv[0][1])):
        cell = cells[(prop, row)]
        rows.append([c.kind, f'<a href="{esc(cell.href)}">{esc(prop)}</a>', esc(row_label(row)),
                     esc(c.was or "—"), esc(c.now)])
    body = table(rows, raw=True) if len(rows) > 1 else "<p>No cell changed against the baseline.</p>"
    return page("changes against the baseline", '<p><a href="index.html">matrix</a></p>' + body)


def _sections_text(sections: list) -> str:
    return ", ".join(f"{'RFC ' + r if r[0].isdigit() else r} §{s}" for r, s in sections) or "not in the catalogue"


def read_findings_doc(path: Path) -> dict[str, tuple[str, str]]:
    """F-number → (heading, text) of each finding's section of docs/findings.md."""
    try:
        text = Path(path).read_text()
    except OSError:
        return {}
    out: dict[str, tuple[str, str]] = {}
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        heading, _, rest = part.partition("\n")
        m = re.match(r"(F\d+)\b", heading)
        if m:
            out[m.group(1)] = (heading.strip(), rest.strip())
    return out


def _findings(cells: dict, doc: dict, doc_path: Path, out: Path) -> str:
    met: dict[str, list[Cell]] = {}
    for cell in cells.values():
        for f in cell.findings:
            met.setdefault(f, []).append(cell)
    parts = [f"<p>{len(met)} recorded findings met in these results "
             f"(spec/findings.toml; text from {link(rel(doc_path, out), 'docs/findings.md')}).</p>"]
    for fid in sorted(met, key=lambda f: int(f[1:])):
        heading, text = doc.get(fid, (fid, "(no section in docs/findings.md)"))
        where = ", ".join(link(c.href, f"{c.prop} · {row_id(c.row)}") + f" ({c.outcome})" for c in met[fid])
        anchor = f"{rel(doc_path, out)}#{github_anchor(heading)}"
        parts.append(f'<h2 id="{esc(fid)}">{esc(heading)}</h2><p>cases: {where} · {link(anchor, "in docs/findings.md")}'
                     f"</p><pre>{esc(text)}</pre>")
    return page("recorded findings", "\n".join(parts))


def _coverage(coverage) -> str:
    if coverage is None:
        return page("requirement coverage", "<p>no requirement catalogue was given.</p>")
    rows, counts = coverage
    styled = [[esc(v) for v in rows[0]]] + [[_coverage_td(v) for v in row] for row in rows[1:]]
    return page("requirement coverage",
                "<p>Every rule of spec/requirements.toml with what judges it; a column per stack-controller "
                "in these results (as <code>longlook coverage --requirements</code> prints it).</p>"
                + table(styled, raw=True) + "<h2>per strength</h2>" + table(counts))


def _coverage_td(value: str) -> str:
    first = value.split(":")[0]
    colour = {"judged": "passed", "finding": "expected failure", "failed": "failed", "error": "error",
              "inconclusive": "inconclusive", "not exercised": "not exercised"}.get(first)
    return f'<span class="badge {outcome_class(colour)}">{esc(value)}</span>' if colour else esc(value)
