"""aioquic's qlog in a virtual run, encoded while the run goes on.

aioquic's QuicLogger keeps every event as nested dicts and lists until the end
(~60k events, ~5 containers each, in a 5 MB transfer). All of them stay tracked
by the cyclic garbage collector, whose older-generation passes traverse every
live container: with qlog on, a run spent about as much time in those passes and
in the final `json.dumps` as in the stack itself. Here each trace encodes its
events with msgspec soon after they are logged and keeps only bytes, which the
collector does not track, then writes the same document aioquic's file logger
and our real-time endpoint write.

When an event is final. aioquic logs `packet_received` first and fills its frame
list while it handles the packet (logging other events meanwhile), so an event
may still change until the call into the connection that logged it returns.
The host calls `settle(SETTLE_BATCH)` once its calls into the connection are
over for the instant (after it sends): every event held then is final, and once
a batch's worth is held they are encoded in one call rather than one call per
instant; `write()` settles whatever is left.

What differs from `json.dumps` of aioquic's dicts is the text, never the parsed
document: no spaces after separators, exponents as msgspec writes them (`1e-7`,
not `1e-07`), non-ASCII as UTF-8 rather than `\\u` escapes. A non-finite float
(aioquic's own fields never held one in our runs; a custom controller's
`get_log_data` could) would be written as null, where `json` writes the
non-standard `Infinity`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from aioquic.quic.logger import QLOG_VERSION, QuicLogger, QuicLoggerTrace, hexdump

from harness.virtual.loop import Clock

_encode = msgspec.json.Encoder().encode
#: Events a trace holds as dicts before the host's settle encodes them.
SETTLE_BATCH = 256


class _Event(msgspec.Struct, gc=False):
    """aioquic's event record, fields in its key order (encodes as the same
    object; cheaper to build than a dict, and invisible to the collector)."""

    data: Any
    name: str
    time: float


class SettlingTrace(QuicLoggerTrace):
    """A QuicLoggerTrace whose events are held as dicts only until `settle()`.
    Times are virtual: `clock.ns` ns since the link's start, on the wall clock
    at `epoch_unix_ns`, in ms, computed as aioquic computes them from a clock
    read (`encode_time(time.time())`), so the values are bit-identical."""

    def __init__(self, *, is_client: bool, odcid: bytes, clock: Clock, epoch_unix_ns: int) -> None:
        super().__init__(is_client=is_client, odcid=odcid)
        self.odcid = hexdump(odcid)
        self._clock = clock
        self._epoch_unix_ns = epoch_unix_ns
        self._pending: list[_Event] = []
        self._chunks: list[bytes] = []
        # Many events share an instant: its time in ms is computed once.
        self._last_ns: int | None = None
        self._last_ms = 0.0

    def log_event(self, *, category: str, event: str, data: dict) -> None:
        ns = self._clock.ns
        if ns != self._last_ns:
            self._last_ns, self._last_ms = ns, self.encode_time((self._epoch_unix_ns + ns) / 1e9)
        self._pending.append(_Event(data, category + ":" + event, self._last_ms))

    def settle(self, min_events: int = 1) -> None:
        """Encodes the events held, if there are at least `min_events` of them."""
        if self._pending and len(self._pending) >= min_events:
            # One encode per batch; its brackets are dropped and the batches
            # joined with commas when the document is written.
            self._chunks.append(_encode(self._pending)[1:-1])
            self._pending = []

    def events_json(self) -> bytes:
        """The settled events as one JSON array."""
        self.settle()
        return b"[" + b",".join(c for c in self._chunks if c) + b"]"

    def to_dict(self) -> dict[str, Any]:
        return {"common_fields": {"ODCID": self.odcid},
                "events": msgspec.json.decode(self.events_json()),
                "vantage_point": self._vantage_point}

    def document(self) -> bytes:
        """The qlog file: aioquic's one-trace JSON document, keys in its order."""
        trace = {"common_fields": {"ODCID": self.odcid},
                 "events": msgspec.Raw(self.events_json()),
                 "vantage_point": self._vantage_point}
        return _encode({"qlog_format": "JSON", "qlog_version": QLOG_VERSION, "traces": [trace]})


class VirtualQlog(QuicLogger):
    """A QuicLogger (aioquic's public logger interface) of SettlingTraces; `write`
    puts one `<ODCID>.qlog` per connection in a directory, as the real endpoint."""

    def __init__(self, clock: Clock, epoch_unix_ns: int) -> None:
        super().__init__()
        self._clock = clock
        self._epoch_unix_ns = epoch_unix_ns

    def start_trace(self, is_client: bool, odcid: bytes) -> SettlingTrace:
        trace = SettlingTrace(is_client=is_client, odcid=odcid, clock=self._clock,
                              epoch_unix_ns=self._epoch_unix_ns)
        self._traces.append(trace)
        return trace

    def settle(self, min_events: int = 1) -> None:
        """Encodes the events of each trace that holds at least `min_events`; call it
        only between calls into the connection (when every event held is final)."""
        for trace in self._traces:
            trace.settle(min_events)

    def write(self, qlog_dir: Path) -> None:
        qlog_dir.mkdir(parents=True, exist_ok=True)
        for trace in self._traces:
            (qlog_dir / (trace.odcid + ".qlog")).write_bytes(trace.document())
