"""Chromium's NetLog → raw traces in qlog shape, so a browser's QUIC is read like any stack.

A NetLog (`--log-net-log`) is one JSON document: `constants` (numeric ids of event
and source types) and `events`, each with a `source` (id and type), a numeric
`type`, a `phase`, a `time` (ms of base::TimeTicks, as a string) and `params`. Its
QUIC sessions are the sources whose events say QUIC_SESSION_*; each becomes one
RawTrace holding only what a congestion-control reader needs, named as qlog names
it (harness/observe/dialects/chromium.py states what is missing):

- QUIC_SESSION_PACKET_SENT → `quic:packet_sent` at its `sent_time_us` (µs of
  CLOCK_MONOTONIC, the clock base::TimeTicks reads on Linux), with the frames
  logged (…_FRAME_SENT) since the previous packet, which are the frames of this one
  (less a padded datagram's re-log of its packets' frames: `_Session._drop_relog`);
- QUIC_SESSION_PACKET_LOST → `quic:packet_lost` at its `detection_time_us`, in the
  packet-number space of the latest packet sent with that number (the event names no
  space; Chromium keeps one per encryption level).

Times become ms on CLOCK_MONOTONIC, and the trace's description states the origin
(`reference_time_monotonic_us=0`), so the app log's version record puts them on
the link's clock ("monotonic+applog", harness/observe/dialects/_clock.py). ACK
frames and RTTs are logged to the millisecond only (the events' `time`), so they
are left to the capture, which times them to the µs.

A NetLog cut short (a browser killed before it closed the file) lacks its closing
`]}`, and may end inside an event: it is closed after its last whole event, read
and marked partial.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from harness.observe.qlog_raw import QlogError, RawTrace

#: Chromium's encryption levels → qlog packet types.
PACKET_TYPE = {"ENCRYPTION_INITIAL": "initial", "ENCRYPTION_HANDSHAKE": "handshake",
               "ENCRYPTION_ZERO_RTT": "0RTT", "ENCRYPTION_FORWARD_SECURE": "1RTT"}
_FRAME = re.compile(r"QUIC_SESSION_(\w+?)_FRAME_SENT")
#: NetLog frame names whose qlog frame_type differs from the lower-cased name.
FRAME_TYPE = {"WINDOW_UPDATE": "max_data", "BLOCKED": "data_blocked", "RST_STREAM": "reset_stream",
              "GOAWAY": "connection_close"}
_decode = msgspec.json.Decoder(dict[str, Any]).decode


def is_netlog(head: bytes) -> bool:
    """Whether a file's first bytes are a NetLog's (it opens with its constants)."""
    return re.match(rb'\s*\{\s*"constants"\s*:', head) is not None


def read_netlog(data: bytes, source: str) -> list[RawTrace]:
    """One RawTrace per QUIC session of the NetLog `data` read from `source`."""
    partial = False
    try:
        doc = _decode(data)
    except (msgspec.DecodeError, ValueError) as e:
        doc, partial = _complete(data), True
        if doc is None:
            raise QlogError(f"{source}: not a readable NetLog ({e})") from e
    try:
        names = {v: k for k, v in doc["constants"]["logEventTypes"].items()}
        events = doc.get("events") or []
    except (KeyError, TypeError, AttributeError) as e:
        raise QlogError(f"{source}: a NetLog without its constants' logEventTypes") from e
    sessions: dict[Any, _Session] = {}
    for e in events:
        try:
            name = names.get(e["type"], "")
            if not name.startswith("QUIC_SESSION"):
                continue
            sid = e["source"]["id"]
            sessions.setdefault(sid, _Session()).add(name, e.get("params") or {})
        except (KeyError, TypeError, ValueError, AttributeError):
            sessions.setdefault("?", _Session()).skipped += 1
    out = []
    for sid, s in sessions.items():
        if not s.events:
            continue
        notes = [f"{source}: NetLog read as qlog (QUIC session {sid}, host {s.host or 'unknown'})"]
        if partial:
            notes.append(f"{source}: the NetLog was cut short (no closing ']}}'); read up to its last event")
        if s.skipped:
            notes.append(f"{source}: {s.skipped} NetLog event(s) with missing or mistyped fields skipped")
        out.append(RawTrace(source=source, format="NetLog", header={"qlog_format": "NetLog"},
                            meta={"description": "reference_time_monotonic_us=0",
                                  "vantage_point": {"type": "client"}, "group_id": str(sid)},
                            events=s.events, partial=partial, notes=notes))
    if not out:
        raise QlogError(f"{source}: a NetLog with no QUIC packet sent (was the browser's QUIC used?)")
    return out


def _complete(data: bytes) -> dict[str, Any] | None:
    """A NetLog cut short, closed after its last whole event; None if that fails too.
    Chromium writes one event per line, so a cut inside one drops that line."""
    for _ in range(3):
        try:
            return _decode(data.rstrip().rstrip(b",") + b"]}")
        except (msgspec.DecodeError, ValueError):
            cut = data.rstrip().rfind(b"\n")
            if cut < 0:
                return None
            data = data[:cut]
    return None


class _Session:
    """One QUIC session's events, converted as they are met."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        # Frames logged since the last packet: (key, qlog frame). Chromium logs a frame
        # when it is added to a packet, and, for a datagram it pads (Initial ones), logs
        # the frames of the datagram's packets again, then the padding, just before
        # QUIC_SESSION_COALESCED_PACKET_SENT, possibly after frames of the next packet.
        self.pending: list[tuple[tuple[str, str], dict[str, str]]] = []
        #: Keys of the frames of the packets sent since the last datagram went.
        self.unflushed: list[tuple[str, str]] = []
        #: packet number → the space of the latest packet sent with it.
        self.space_of: dict[int, str] = {}
        self.host: str | None = None
        self.skipped = 0

    def _drop_relog(self) -> None:
        """At a datagram's send: the trailing padding and, before it, a repeat of the
        frames of the packets it carries are that re-log, not the next packet's frames."""
        while self.pending and self.pending[-1][0][0] == "QUIC_SESSION_PADDING_FRAME_SENT":
            self.pending.pop()
        n = len(self.unflushed)
        if n and [k for k, _ in self.pending[-n:]] == self.unflushed:
            del self.pending[-n:]
        self.unflushed = []

    def add(self, name: str, p: dict[str, Any]) -> None:
        if name == "QUIC_SESSION":
            self.host = p.get("host") or self.host
            return
        frame = _FRAME.fullmatch(name)
        if frame:
            self.pending.append(((name, repr(sorted(p.items()))),
                                 {"frame_type": FRAME_TYPE.get(frame.group(1), frame.group(1).lower())}))
        elif name == "QUIC_SESSION_COALESCED_PACKET_SENT":
            self._drop_relog()
        elif name == "QUIC_SESSION_PACKET_SENT":
            ptype, pn = PACKET_TYPE[p["encryption_level"]], int(p["packet_number"])
            self.space_of[pn] = ptype
            self.events.append({"time": int(p["sent_time_us"]) / 1000, "name": "quic:packet_sent",
                                "data": {"header": {"packet_type": ptype, "packet_number": pn},
                                         "raw": {"length": int(p["size"])}, "frames": [f for _, f in self.pending],
                                         "transmission_type": p.get("transmission_type")}})
            self.unflushed += [k for k, _ in self.pending]
            self.pending = []
        elif name == "QUIC_SESSION_PACKET_LOST":
            pn = int(p["packet_number"])
            self.events.append({"time": int(p["detection_time_us"]) / 1000, "name": "quic:packet_lost",
                                "data": {"header": {"packet_type": self.space_of.get(pn, "1RTT"),
                                                    "packet_number": pn}}})
