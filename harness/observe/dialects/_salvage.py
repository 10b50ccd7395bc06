"""Recovering the readable part of a broken JSON document (used by harness/observe/qlog.py).

A qlog written by a killed stack stops mid-document; two writers sharing one file
interleave. What precedes the first syntax error is a valid prefix: this cuts it
after the last complete container and closes the brackets still open, so every
complete event is kept. The cut prefers a container that closes at depth ≤ 4, where
the elements of `traces[].events[]` close, so a half-written event is dropped rather
than kept with half its frames.

(It lives in this package only because harness/observe/ holds qlog.py alone for the
readers; it knows nothing about stacks.)
"""

from __future__ import annotations

import json
import re
from typing import Any

#: A complete string, a lone quote (an unterminated string), or a bracket.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|"|[\[\]{}]', re.S)
_CLOSE = {"[": "]", "{": "}"}
#: Depth (after closing) at which events of a traces[].events[] document end.
EVENT_DEPTH = 4
#: Candidate cuts deeper than this are not kept (their bracket stack is copied).
MAX_DEPTH = 64


def salvage(prefix: str) -> Any | None:
    """The value of `prefix` cut back to a complete container and closed; None if none."""
    for pos, stack in _candidates(prefix):
        text = prefix[:pos] + "".join(_CLOSE[c] for c in reversed(stack))
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            continue
    return None


def _candidates(prefix: str) -> list[tuple[int, list[str]]]:
    """(cut position, brackets open there), best first: the last close at depth ≤
    EVENT_DEPTH, then the last few closes at any depth."""
    stack: list[str] = []
    shallow: tuple[int, list[str]] | None = None
    recent: list[tuple[int, list[str]]] = []
    for m in _TOKEN.finditer(prefix):
        tok = m.group()
        if tok == '"':
            break  # unterminated string: nothing after it is usable
        if tok in "[{":
            stack.append(tok)
            continue
        if tok in "]}":
            if not stack or _CLOSE[stack.pop()] != tok:
                break  # brackets that do not nest: garbage from here on
            if len(stack) > MAX_DEPTH:
                continue
            cut = (m.end(), list(stack))
            if len(stack) <= EVENT_DEPTH:
                shallow = cut
            recent = (recent + [cut])[-4:]
    out = ([shallow] if shallow else []) + [c for c in reversed(recent) if c is not shallow]
    return out
