"""Reads the TLA+ values TLC prints (PrintT): integers, strings, booleans, tuples,
records and sets; enough for what our specs print, nothing more."""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r'\s*(<<|>>|\|->|[\[\]{},]|"(?:[^"\\]|\\.)*"|-?\d+|TRUE|FALSE|[A-Za-z_]\w*)')


class TlaValueError(ValueError):
    pass


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise TlaValueError(f"cannot read TLA+ value at {pos}: {text[pos:pos + 30]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


def parse(text: str) -> Any:
    """Tuples become lists, records dicts, sets frozensets (of hashable parts)."""
    toks = _tokens(text)
    try:
        value, end = _value(toks, 0)
    except IndexError:
        raise TlaValueError(f"TLA+ value ends early: {text[:60]!r}") from None
    if end != len(toks):
        raise TlaValueError(f"trailing input after a TLA+ value: {' '.join(toks[end:end + 5])}")
    return value


def _seq(toks: list[str], i: int, close: str) -> tuple[list, int]:
    items = []
    if toks[i] == close:
        return items, i + 1
    while True:
        v, i = _value(toks, i)
        items.append(v)
        if toks[i] == close:
            return items, i + 1
        if toks[i] != ",":
            raise TlaValueError(f"expected , or {close}, got {toks[i]}")
        i += 1


def _value(toks: list[str], i: int) -> tuple[Any, int]:
    t = toks[i]
    if t == "<<":
        return _seq(toks, i + 1, ">>")
    if t == "{":
        items, j = _seq(toks, i + 1, "}")
        return frozenset(items), j
    if t == "[":
        rec, i = {}, i + 1
        while toks[i] != "]":
            key, arrow = toks[i], toks[i + 1]
            if arrow != "|->":
                raise TlaValueError(f"expected |-> after {key}")
            rec[key], i = _value(toks, i + 2)
            if toks[i] == ",":
                i += 1
        return rec, i + 1
    if t.startswith('"'):
        return t[1:-1].replace('\\"', '"'), i + 1
    if t in ("TRUE", "FALSE"):
        return t == "TRUE", i + 1
    if re.fullmatch(r"-?\d+", t):
        return int(t), i + 1
    raise TlaValueError(f"unexpected {t!r} in a TLA+ value")


def render(value: Any) -> str:
    """A Python value (as `parse` returns them) written as TLA+: the inverse of parse
    for booleans, integers, strings, sets (Python sets), sequences and records."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(render(v) for v in sorted(value)) + "}"
    if isinstance(value, (list, tuple)):
        return "<<" + ", ".join(render(v) for v in value) + ">>"
    if isinstance(value, dict):
        return "[" + ", ".join(f"{k} |-> {render(v)}" for k, v in value.items()) + "]"
    raise TlaValueError(f"cannot write {value!r} as a TLA+ value")
