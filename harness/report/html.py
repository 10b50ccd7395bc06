"""The static site's bits of HTML: a page, a table, an outcome badge, links.

Generated with the standard library (html.escape) rather than a template engine:
the pages are a few tables and lists, every value in them is escaped in one place
(``esc``), and the suite needs no new dependency for it. The site references no
network resource: one local style sheet, no scripts, no fonts, no CDN.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

#: Outcome → (CSS class, background colour, text colour). Colour-blind-safe where it
#: matters (Okabe–Ito): the word is always written out beside the colour anyway.
COLOURS = {
    "failed": ("#D55E00", "#FFFFFF"),
    "error": ("#8B1A1A", "#FFFFFF"),
    "unexpected pass": ("#CC79A7", "#000000"),
    "expected failure": ("#E69F00", "#000000"),
    "inconclusive": ("#F0E442", "#000000"),
    "not exercised": ("#DDDDDD", "#000000"),
    "passed": ("#009E73", "#FFFFFF"),
    "skipped": ("#FFFFFF", "#555555"),
}

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.2em 2em; color: #222; }
nav a { margin-right: 1.2em; }
table { border-collapse: collapse; margin: 0.6em 0 1.4em; }
th, td { border: 1px solid #BBB; padding: 3px 6px; vertical-align: top; font-size: 13px; }
th { background: #F4F4F4; text-align: left; }
table.matrix td { text-align: center; min-width: 5.5em; }
table.matrix th.prop { writing-mode: vertical-rl; transform: rotate(180deg); white-space: nowrap; }
table.matrix th.group { text-align: center; }
td.cell a { color: inherit; text-decoration: none; display: block; }
td.cell small, td.cell .judged { display: block; font-size: 11px; }
td.zero { background-image: repeating-linear-gradient(45deg, transparent 0 6px, rgba(0,0,0,.28) 6px 9px); }
td.zero .judged { font-weight: bold; }
td.none { color: #999; }
td.regression { outline: 3px solid #B2182B; outline-offset: -3px; }
td.improvement { outline: 3px dashed #1A9850; outline-offset: -3px; }
td.changed, td.new { outline: 2px dotted #555; outline-offset: -2px; }
td.cell small.was { font-weight: bold; }
pre { background: #F7F7F7; border: 1px solid #DDD; padding: 6px 8px; white-space: pre-wrap; font-size: 12px; }
.badge { padding: 1px 6px; border-radius: 3px; border: 1px solid #888; }
img.plot { max-width: 100%; border: 1px solid #DDD; }
.legend span { margin-right: 0.6em; }
""" + "".join(f".o-{k.replace(' ', '-')} {{ background-color: {bg}; color: {fg}; }}\n"
              for k, (bg, fg) in COLOURS.items())


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def slug(text: str) -> str:
    """A file-name-safe slug."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:150] or "x"


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading (docs/findings.md's sections)."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def outcome_class(outcome: str) -> str:
    return "o-" + outcome.replace(" ", "-") if outcome in COLOURS else "none"


def badge(outcome: str) -> str:
    return f'<span class="badge {outcome_class(outcome)}">{esc(outcome)}</span>'


def link(href: str, text: str) -> str:
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def rel(target: Path, from_dir: Path) -> str:
    """`target` relative to `from_dir`, as a URL path (the site opens from disk)."""
    return Path(os.path.relpath(Path(target).absolute(), Path(from_dir).absolute())).as_posix()


def table(rows: list[list[str]], *, header: bool = True, cls: str = "", raw: bool = False) -> str:
    """rows of text (escaped here), or of ready HTML with raw=True; the first row as the header."""
    out = [f'<table class="{cls}">' if cls else "<table>"]
    for i, row in enumerate(rows):
        tag = "th" if header and i == 0 else "td"
        out.append("<tr>" + "".join(f"<{tag}>{v if raw else esc(v)}</{tag}>" for v in row) + "</tr>")
    return "\n".join(out + ["</table>"])


def page(title: str, body: str, *, depth: int = 0) -> str:
    """A whole page; `depth` is how many directories below the site's root it is."""
    up = "../" * depth
    nav = " ".join(link(f"{up}{href}", text) for href, text in
                   (("index.html", "matrix"), ("pairs.html", "client × server"), ("findings.html", "findings"),
                    ("coverage.html", "requirements"),
                    ("model.html", "model"), ("reproductions.html", "reproductions")))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<title>{esc(title)}</title><link rel="stylesheet" href="{up}style.css"></head>\n'
            f"<body><nav>{nav}</nav>\n<h1>{esc(title)}</h1>\n{body}\n</body></html>\n")
