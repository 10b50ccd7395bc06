"""The whole-document qlog reader: one JSON value holding `traces[]`.

Covers qlog 0.3 JSON (aioquic: events are objects) and draft-00 (picoquic: events
are arrays described by `event_fields`, converted here to 0.3-shaped dicts). The
JSON-SEQ reader and the choice between the two stay in harness/observe/qlog.py,
whose `read_raw` calls `read_doc`; this module only turns bytes into `RawTrace`s.

A broken document is cut back to its last complete part (dialects/_salvage.py) and
noted; only a document with nothing usable raises `QlogError`.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from harness.observe.dialects._salvage import salvage
from harness.observe.qlog_raw import DECODE_ERRORS, QlogError, RawTrace

#: A whole-document JSON file larger than this is refused rather than loaded.
MAX_DOC_BYTES = 1 << 30

# msgspec decodes qlog 2–4× faster than the json module (bench/qlog_bench.py); a
# document it rejects falls back to json, whose errors carry the position the notes cite.
_decode = msgspec.json.Decoder().decode


def read_doc(f, source: str) -> list[RawTrace]:
    """A whole-document qlog; a broken document is cut back to its last complete part."""
    data = f.read(MAX_DOC_BYTES + 1)
    if len(data) > MAX_DOC_BYTES:
        raise QlogError(f"{source}: larger than {MAX_DOC_BYTES} bytes; refusing to load it whole")
    try:
        doc = _decode(data)
    except DECODE_ERRORS:
        return _read_broken_doc(data, source)
    if not isinstance(doc, dict):
        raise QlogError(f"{source}: top-level JSON value is a {type(doc).__name__}, not a qlog object")
    return _doc_traces(doc, source, [])


def _read_broken_doc(data: bytes, source: str) -> list[RawTrace]:
    """The slow path for a document msgspec rejects: the standard library's decoder
    says where it broke (and accepts what msgspec does not, e.g. NaN), then salvage."""
    notes: list[str] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        notes.append(f"{source}: invalid UTF-8 at byte {e.start}; read up to it")
        text = data[: e.start].decode("utf-8")
    start = len(text) - len(text.lstrip("\ufeff \t\r\n"))
    try:
        doc, end = json.JSONDecoder().raw_decode(text, start)
        if text[end:].strip():
            notes.append(f"{source}: extra data after the JSON document at {_where(text, end)} "
                         "(two writers in one file?); kept the first document")
    except (json.JSONDecodeError, RecursionError) as e:
        pos = getattr(e, "pos", len(text))
        doc = salvage(text[:pos])
        what = e.msg if isinstance(e, json.JSONDecodeError) else "nesting too deep"
        if doc is None:
            raise QlogError(f"{source}: invalid JSON at {_where(text, pos)}: {what}; nothing salvageable") from None
        notes.append(f"{source}: invalid JSON at {_where(text, pos)}: {what}; kept what preceded it")
    if not isinstance(doc, dict):
        raise QlogError(f"{source}: top-level JSON value is a {type(doc).__name__}, not a qlog object")
    return _doc_traces(doc, source, notes)


def _where(text: str, pos: int) -> str:
    """'line L, byte B' of a character position, for notes."""
    line = text.count("\n", 0, pos) + 1
    return f"line {line}, byte {len(text[:pos].encode('utf-8', 'replace'))}"


def _doc_traces(doc: dict[str, Any], source: str, notes: list[str]) -> list[RawTrace]:
    """A RawTrace per entry of a document's traces[] (or the document itself if it is one trace)."""
    partial = bool(notes)
    traces = doc.get("traces")
    if not isinstance(traces, list):
        traces = [doc] if isinstance(doc.get("events"), list) else []
    header = {k: v for k, v in doc.items() if k != "traces"}
    out = []
    for tr in traces:
        if not isinstance(tr, dict):
            continue
        meta = {k: v for k, v in tr.items() if k != "events"}
        fields = tr.get("event_fields") or doc.get("event_fields")
        events, bad = _doc_events(tr.get("events"), fields)
        t_notes = notes + ([f"{source}: {bad} malformed event(s) skipped"] if bad else [])
        out.append(RawTrace(source, "draft-00" if fields else "JSON", header, meta, events, partial, t_notes))
    if not out:
        out.append(RawTrace(source, "JSON", header, {}, [], partial=True,
                            notes=notes + [f"{source}: no traces[] with events in the document"]))
    return out


def _doc_events(events: Any, fields: Any) -> tuple[list[dict[str, Any]], int]:
    """Events as 0.3-shaped dicts; draft-00 arrays are converted through `fields`."""
    if not isinstance(events, list):
        return [], 0
    if not fields:
        good = [e for e in events if isinstance(e, dict)]
        return good, len(events) - len(good)
    return _draft00_events(events, [str(x) for x in fields])


def _draft00_events(events: list[Any], fields: list[str]) -> tuple[list[dict[str, Any]], int]:
    """draft-00 arrays → 0.3-shaped dicts, and how many were malformed."""
    idx = {name: i for i, name in enumerate(fields)}
    i_time = idx.get("relative_time", idx.get("time", idx.get("delta_time")))
    delta = "relative_time" not in idx and "time" not in idx
    i_cat, i_ev, i_data = idx.get("category"), idx.get("event", idx.get("event_type")), idx.get("data")
    out, bad, clock = [], 0, 0.0
    for e in events:
        try:
            t = float(e[i_time])
            if delta:
                clock += t
                t = clock
            out.append({"time": t, "name": f"{e[i_cat]}:{e[i_ev]}", "data": e[i_data] if i_data is not None else {}})
        except (TypeError, IndexError, ValueError, KeyError):
            bad += 1
    return out, bad
