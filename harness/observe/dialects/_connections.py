"""One qlog file holding several connections (interleaved group_ids) read as one
trace per connection."""

from __future__ import annotations

import dataclasses
from itertools import repeat
from typing import Any


def _group(e: dict[str, Any]) -> Any:
    """The event's group_id, made hashable."""
    g = e.get("group_id")
    return g if g is None or isinstance(g, (str, int)) else str(g)


def split_connections(raw: Any) -> list[Any]:
    """A file whose events interleave several group_ids (connections) → one RawTrace each.

    A group_id that merely changes once (quinn switches from the original DCID to the
    peer's chosen CID after the first packets) is one connection, and only noted.
    """
    try:  # the common case, hashable ids; map() keeps the loop in C
        groups_seen = set(map(dict.get, raw.events, repeat("group_id")))
    except TypeError:
        groups_seen = {_group(e) for e in raw.events}
    if len(groups_seen) <= 1:
        return [raw]
    order: list[Any] = []
    groups: dict[Any, list[dict[str, Any]]] = {}
    interleaved = False
    for e in raw.events:
        g = _group(e)
        if not order or order[-1] != g:
            interleaved = interleaved or g in groups
            order.append(g)
        groups.setdefault(g, []).append(e)
    if len(groups) <= 1:
        return [raw]
    if not interleaved:
        raw.notes.append(f"{raw.source}: group_id changes within the trace ({' → '.join(map(str, order))}); "
                         "read as one connection")
        return [raw]
    note = "{}: connection group_id={} of %d in the file" % len(groups)
    return [dataclasses.replace(raw, meta={**raw.meta, "group_id": g}, events=evs,
                                notes=list(raw.notes) + [note.format(raw.source, g)])
            for g, evs in groups.items()]
