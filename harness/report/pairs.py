"""pairs.html: the client × server grid. A row per client stack, a column per server
stack; each square holds the cases run between the two, split by which of them sent
the data and was judged (a download judges the server, an upload the client), with
their outcomes counted and the worst one as its colour. Below it, each pair's cases
with links to their cell pages.

A record names its judged stack (`stack`), its `peer` (None: the same stack) and its
`direction` (harness/results/record.py); records written before these fields were
kept read as downloads between a stack and itself.
"""

from __future__ import annotations

from pathlib import Path

from harness.report.html import badge, esc, link, outcome_class, page, table
from harness.results import OUTCOMES

#: The two ways data moves between a client and a server, and whom each judges.
WAYS = (("download", "↓ server sends"), ("upload", "↑ client sends"))


def pair_of(rec: dict) -> tuple[str, str, str]:
    """(client, server, direction) of a record's case."""
    stack = rec.get("stack") or "?"
    peer = rec.get("peer") or stack
    direction = rec.get("direction") or "download"
    return (stack, peer, direction) if direction == "upload" else (peer, stack, direction)


def write_pairs(out: Path, cells: dict) -> int:
    """Writes pairs.html from the report's cells; returns how many pairs it shows."""
    grid: dict[tuple[str, str], dict[str, list]] = {}
    for cell in cells.values():
        for rec in cell.records:
            if not rec.get("case"):
                continue  # a record of no case (a collection error) belongs to no pair
            client, server, direction = pair_of(rec)
            grid.setdefault((client, server), {}).setdefault(direction, []).append((rec, cell))
    clients = sorted({c for c, _ in grid})
    servers = sorted({s for _, s in grid})
    head = "<tr><th>client ↓ · server →</th>" + "".join(f"<th>{esc(s)}</th>" for s in servers) + "</tr>"
    rows = []
    for client in clients:
        tds = [f"<th>{esc(client)}</th>"]
        for server in servers:
            tds.append(_square(client, server, grid.get((client, server))))
        rows.append("<tr>" + "".join(tds) + "</tr>")
    details = [_pair_cases(client, server, ways) for (client, server), ways in sorted(grid.items())]
    body = (f"<p>{len(grid)} client × server pairs. Each square: the cases "
            "between the two, by which side sent the data and was judged, with their outcomes; its colour is "
            "the worst of them.</p>"
            f'<table class="matrix">{head}{"".join(rows)}</table>' + "".join(details))
    (Path(out) / "pairs.html").write_text(page("client × server", body))
    return len(grid)


def _anchor(client: str, server: str) -> str:
    return f"pair-{client}--{server}"


def _square(client: str, server: str, ways: dict | None) -> str:
    if not ways:
        return '<td class="none">—</td>'
    worst = min((rec["outcome"] for cases in ways.values() for rec, _ in cases), key=OUTCOMES.index)
    lines = []
    for direction, label in WAYS:
        cases = ways.get(direction)
        if cases:
            counts = {o: sum(rec["outcome"] == o for rec, _ in cases) for o in OUTCOMES}
            judged = sum(int((rec.get("examples") or {}).get("judged") or 0) for rec, _ in cases)
            text = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
            lines.append(f"<small>{esc(label)}: {esc(text)} · {judged} judged</small>")
    return (f'<td class="cell {outcome_class(worst)}"><a href="#{esc(_anchor(client, server))}">{esc(worst)}'
            f'{"".join(lines)}</a></td>')


def _pair_cases(client: str, server: str, ways: dict) -> str:
    rows = [["judged", "property", "case", "outcome", "examples judged", "finding"]]
    for direction, label in WAYS:
        for rec, cell in sorted(ways.get(direction, []), key=lambda rc: (OUTCOMES.index(rc[0]["outcome"]),
                                                                        rc[0]["property"], rc[0]["case"])):
            judged_side = server if direction == "download" else client
            rows.append([esc(f"{judged_side} ({label})"), link(cell.href, rec["property"]), esc(rec["case"]),
                         badge(rec["outcome"]), esc(str((rec.get("examples") or {}).get("judged") or 0)),
                         esc(rec.get("finding") or "")])
    return (f'<h2 id="{esc(_anchor(client, server))}">{esc(client)} client · {esc(server)} server</h2>'
            + table(rows, raw=True))
