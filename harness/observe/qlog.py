"""qlog files → raw traces → normalised `Trace`s (harness.observe.events).

Two layers. `read_raw` turns any qlog file into `RawTrace`s: the file's and the
trace's metadata plus events as dicts in qlog 0.3 shape (`time`, `name`
"category:event", `data`), whatever the serialisation:

- JSON: one document, `traces[]` each with `events[]` of objects (qlog 0.3, aioquic);
- draft-00 JSON: events as arrays described by `event_fields` (picoquic);
- JSON-SEQ: RS-separated records, the first the header (quic-go, quiche, quinn),
  also accepted without RS, one record per line;
- Chromium's NetLog, no qlog at all, turned into the same shape by
  harness/observe/netlog.py.

Broken input never raises from deep inside: what could be read is kept, the trace is
marked partial and a note names the file and where it broke (line, byte). Only a file
with nothing readable raises `QlogError`, naming the file.

`read_trace` / `read_run` then apply the stack's dialect (harness/observe/dialects)
to give one `Trace` per connection per vantage. See docs/trace.md.

This module sniffs the serialisation, reads JSON-SEQ and assembles runs; the
whole-document reader is harness/observe/qlog_doc.py, and `RawTrace` / `QlogError`
live in harness/observe/qlog_raw.py (re-exported here, where callers import them).
"""

from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from harness.observe.dialects import _fields
from harness.observe.dialects._connections import split_connections
from harness.observe.events import Trace
from harness.observe.netlog import is_netlog, read_netlog
from harness.observe.qlog_doc import read_doc
from harness.observe.qlog_raw import DECODE_ERRORS, QlogError, RawTrace

#: Read size for the streaming JSON-SEQ reader.
CHUNK = 4 << 20
#: Bytes read first to tell the serialisation and JSON-SEQ's separator.
SNIFF = 1 << 16
RS = b"\x1e"
#: Notes listing individual bad records stop after this many (then a count).
MAX_RECORD_NOTES = 5


@contextmanager
def no_gc():
    """Pause the cyclic GC while bulk-loading: parsed JSON has no cycles, yet the
    collections its millions of dicts trigger cost more than the parse (bench/qlog_bench.py).
    freeze()+unfreeze() then moves survivors straight to the oldest generation, unswept."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if was:
            gc.enable()


def read_raw(path: str | Path, prune: bool = False) -> list[RawTrace]:
    """Every trace in the qlog file at `path`; QlogError if nothing is readable.

    `prune`: JSON-SEQ events keep only the keys the dialects read
    (harness/observe/dialects/_fields.py), which decodes faster; the conformance
    checks need every key and leave it off."""
    path = Path(path)
    try:
        with open(path, "rb") as f, no_gc():
            head = f.read(SNIFF)
            kind = "netlog" if is_netlog(head) else _sniff(head, path)
            f.seek(0)
            if kind == "netlog":  # Chromium's log, in qlog shape (harness/observe/netlog.py)
                traces = read_netlog(f.read(), str(path))
            elif kind == "seq":
                traces = [_read_seq(f, str(path), prune)]
            else:
                traces = read_doc(f, str(path))
    except OSError as e:
        raise QlogError(f"{path}: cannot read: {e.strerror or e}") from e
    except QlogError:
        raise
    except Exception as e:  # a reader bug must still name the file
        raise QlogError(f"{path}: unreadable: {type(e).__name__}: {e}") from e
    if not any(t.events or t.header or t.meta for t in traces):
        raise QlogError(f"{path}: no qlog header or event could be read")
    return [s for t in traces for s in split_connections(t)]


def read_trace(qlog_path: str | Path, stack: str, vantage: str, link_start_unix_ns: int | None,
               applog_path: str | Path | None = None, link_log_path: str | Path | None = None) -> Trace:
    """The first connection of one qlog file as a normalised Trace (see read_traces)."""
    first, *more = read_traces(qlog_path, stack, vantage, link_start_unix_ns, applog_path, link_log_path)
    if more:
        first.notes.append(f"{qlog_path}: holds {1 + len(more)} connections; read_traces gives all")
    return first


def read_traces(qlog_path: str | Path, stack: str, vantage: str, link_start_unix_ns: int | None,
                applog_path: str | Path | None = None, link_log_path: str | Path | None = None) -> list[Trace]:
    """One normalised Trace per connection in one qlog file.

    Times become µs since the link's start (`link_start_unix_ns`, the link header's
    `start_unix_ns`); the app log's version record (t_us/wall_us) converts a
    monotonic qlog clock, and the link log aligns a clock nothing else can (the
    first datagram). None for `link_start_unix_ns` leaves times on the qlog's own
    origin, with a note.
    """
    from harness.observe import dialects

    dialect = dialects.get(stack)
    ctx = dialects.Context(stack=stack, vantage=vantage, link_start_unix_ns=link_start_unix_ns,
                           applog=read_version_record(applog_path) if applog_path else None,
                           link_log=Path(link_log_path) if link_log_path else None)
    # One pause for both steps: the raw dicts die by refcount before the collector
    # returns, so it never has to scan them.
    with no_gc():
        return [dialect.convert(raw, ctx) for raw in read_raw(qlog_path, prune=True)]


def read_run(run_dir: str | Path, stack: str) -> dict[str, list[Trace]]:
    """Traces of a `longlook transfer --out` directory: {"client": [...], "server": [...]}.

    A qlog file that cannot be read at all becomes an empty partial Trace whose note
    carries the QlogError, so one broken file does not hide the others.
    """
    run_dir = Path(run_dir)
    link_log = run_dir / "link.ndjson"
    start_ns = read_link_start(link_log)
    stacks = {"client": _peer_stack(run_dir) or stack, "server": stack}
    out: dict[str, list[Trace]] = {}
    for vantage in ("client", "server"):
        stack = stacks[vantage]
        applog = run_dir / vantage / "app.ndjson"
        traces: list[Trace] = []
        for q in sorted(p for p in (run_dir / vantage / "qlog").glob("*") if p.is_file()):
            try:
                traces += read_traces(q, stack, vantage, start_ns, applog if applog.exists() else None, link_log)
            except QlogError as e:
                traces.append(Trace(stack, vantage, [], str(q), partial=True, notes=[str(e)]))
        out[vantage] = traces
    return out


def _peer_stack(run_dir: Path) -> str | None:
    """The receiver's stack where result.json names one (a mixed pair), so the qlog on
    the link's client side is read in its dialect; None otherwise, or when there is no
    readable result. (The sender always runs on the link's server side.)"""
    try:
        name = json.loads((run_dir / "result.json").read_text()).get("peer_stack")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) and name else None


def read_link_start(link_log: str | Path) -> int:
    """`start_unix_ns` from the link log's header line (QlogError naming the file if absent)."""
    try:
        with open(link_log, "rb") as f:
            header = json.loads(f.readline())
        return int(header["start_unix_ns"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise QlogError(f"{link_log}: no link header with start_unix_ns ({type(e).__name__}: {e})") from e


def read_version_record(applog: str | Path) -> dict[str, Any] | None:
    """The app log's first line if it is the version record, else None."""
    try:
        with open(applog, "rb") as f:
            rec = json.loads(f.readline())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("event") == "version" else None


# msgspec decodes qlog 2–4× faster than the json module (bench/qlog_bench.py); any
# input it rejects falls back to json, whose errors carry the position the notes cite.
# These stay with the JSON-SEQ reader on this module: tests/test_qlog_readers.py swaps
# _decode_pruned, SNIFF and CHUNK here (the whole-document decoder is in qlog_doc.py).
_decode_objects = msgspec.json.Decoder(list[dict[str, Any]]).decode
_decode_pruned = msgspec.json.Decoder(list[_fields.Event]).decode


# ------------------------------------------------------------------------ sniffing


def _sniff(head: bytes, path: Path) -> str:
    """"seq" or "doc" from the first bytes; QlogError for anything else."""
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not body:
        raise QlogError(f"{path}: empty file")
    if body[:1] == RS:
        return "seq"
    if body[:1] != b"{":
        raise QlogError(f"{path}: not qlog (starts with byte 0x{body[0]:02x}, expected '{{' or RS)")
    # Line-delimited JSON-SEQ without RS: the first line alone is a complete header.
    first = body.split(b"\n", 1)[0]
    try:
        rec = json.loads(first)
    except (ValueError, RecursionError):
        return "doc"
    if isinstance(rec, dict) and "traces" not in rec and ("trace" in rec or "name" in rec) and b"\n" in body:
        return "seq"
    return "doc"


# ---------------------------------------------------------------------- JSON-SEQ


class _SeqState:
    """Running position and problems of the streaming JSON-SEQ reader."""

    def __init__(self, source: str, prune: bool = False):
        """An empty reader state for the file `source`."""
        self.source = source
        self.prune = prune
        self.header: dict[str, Any] | None = None
        self.events: list[dict[str, Any]] = []
        self.bad: list[str] = []
        self.n_bad = 0
        self.line = 1  # line number at the start of the next unparsed byte
        self.byte = 0
        self.unterminated = 0  # line of a last record without its LF

    def add(self, rec: Any, line: int, byte: int) -> None:
        """One parsed record: the header if it is the first and no event, else an event."""
        if not isinstance(rec, dict):
            self.fail(line, byte, f"record is a {type(rec).__name__}, not an object")
        elif self.header is None and not self.events and "name" not in rec:
            self.header = rec
        else:
            self.events.append(rec)

    def add_batch(self, batch: list[dict[str, Any]], line: int, byte: int) -> None:
        """Fast path for a block whose records all parsed as objects."""
        if self.header is None and not self.events and batch:
            self.add(batch[0], line, byte)
            batch = batch[1:]
        self.events += batch

    def fail(self, line: int, byte: int, why: str) -> None:
        """Counts an unreadable record; the first few are described."""
        self.n_bad += 1
        if len(self.bad) < MAX_RECORD_NOTES:
            self.bad.append(f"line {line} (byte {byte}): {why}")


def _read_seq(f, source: str, prune: bool = False) -> RawTrace:
    """Stream RS- (or newline-) separated records; bad records are skipped and noted."""
    st = _SeqState(source, prune)
    head = f.read(SNIFF)
    sep = RS if RS in head else b"\n"
    pending = head
    while True:
        chunk = f.read(CHUNK)
        if chunk:
            pending += chunk
            if sep not in chunk:
                continue
            cut = pending.rfind(sep)  # the record after it may be incomplete: keep it
        else:
            cut = len(pending)
            # RFC 7464: every record ends with LF; a last one without it may be cut short.
            if pending.strip() and not pending.rstrip(b" \t\r").endswith(b"\n"):
                st.unterminated = st.line + pending.strip().count(b"\n")
        _parse_records(st, pending[:cut], sep)
        st.line += pending.count(b"\n", 0, cut)
        st.byte += cut
        pending = pending[cut:]
        if not chunk:
            break
    return _seq_trace(st)


def _parse_records(st: _SeqState, block: bytes, sep: bytes) -> None:
    """All records of `block`: one decode for the lot, per record if that fails."""
    start, end = _trim(block, sep)
    if start >= end:
        return
    try:
        # One parse of "[r1,r2,…]" is several times faster than one call per record.
        # Each separator becomes a comma (neither RS nor LF may appear raw inside a
        # JSON string); if any piece is not exactly one object, the array is invalid,
        # shorter than the pieces or not all objects, and the slow path says which.
        body = memoryview(block.replace(sep, b","))[start:end]
        batch = _decode_block(st, b"".join((b"[", body, b"]")))
        if len(batch) == block.count(sep, start, end) + 1:
            st.add_batch(batch, st.line, st.byte)
            return
    except DECODE_ERRORS:
        pass
    parts = block.split(sep)
    line, byte = st.line, st.byte
    for p in parts:
        if p.strip():
            try:
                st.add(json.loads(p), line, byte)
            except (ValueError, RecursionError) as e:
                cut_short = isinstance(e, json.JSONDecodeError) and e.pos >= len(p.rstrip()) - 1
                st.fail(line, byte, f"{'truncated record: ' if cut_short else ''}{type(e).__name__}: {e}")
        line += p.count(b"\n")
        byte += len(p) + len(sep)


def _decode_block(st: _SeqState, text: bytes) -> list[dict[str, Any]]:
    """The records of one block as dicts, pruned when asked once the header is known
    (the header record must keep all its keys). A block the pruning types reject
    (e.g. `data` not an object) is decoded whole, so the slow path only ever sees
    blocks with a record that is not JSON or not an object."""
    if st.prune and (st.header is not None or st.events):
        try:
            return _decode_pruned(text)
        except DECODE_ERRORS:
            pass
    return _decode_objects(text)


def _trim(block: bytes, sep: bytes) -> tuple[int, int]:
    """[start, end) of `block` without separators and blanks at either end, found
    without copying the block (strip() would copy megabytes per block)."""
    blank = b" \t\r\n" + sep
    start, end = 0, len(block)
    while start < end and block[start] in blank:
        start += 1
    while end > start and block[end - 1] in blank:
        end -= 1
    return start, end


def _seq_trace(st: _SeqState) -> RawTrace:
    """The RawTrace of a finished JSON-SEQ read, with notes on what was skipped."""
    header = st.header or {}
    meta = header.get("trace") if isinstance(header.get("trace"), dict) else {}
    notes = []
    if st.header is None:
        notes.append(f"{st.source}: no header record; events read without it")
    if st.unterminated and not st.n_bad:
        notes.append(f"{st.source}: last record (line {st.unterminated}) lacks its closing LF: file may be truncated")
    if st.n_bad:
        more = f" (+{st.n_bad - len(st.bad)} more)" if st.n_bad > len(st.bad) else ""
        notes.append(f"{st.source}: {st.n_bad} unreadable record(s) skipped: " + "; ".join(st.bad) + more)
    file_header = {k: v for k, v in header.items() if k != "trace"}
    return RawTrace(st.source, "JSON-SEQ", file_header, meta, st.events, partial=bool(st.n_bad or st.unterminated),
                    notes=notes)
