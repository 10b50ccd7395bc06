"""Turning a qlog's event times into µs since the link's start.

The link's time 0 is a wall-clock instant (`start_unix_ns` in the link header), so
every qlog clock is first put on the wall clock, by the first of these that applies:

1. `wall`: the qlog names a wall-clock reference — `reference_time.wall_clock_time`
   (quic-go, quiche) or a numeric reference_time that is an epoch value;
2. `monotonic+applog`: a CLOCK_MONOTONIC reference (picoquic's numeric
   reference_time; `reference_time_monotonic_us=N` in the description, written by
   our quinn and quiche endpoints) plus the app log's version record, whose `t_us`
   (monotonic) and `wall_us` were read together;
3. `epoch`: no reference and times that are themselves epoch values (aioquic logs
   time.time() in ms);
4. `link`: the endpoint's first sent datagram is the link's first arrival in its
   direction (c2s for a client, s2c for a server); the error is the send latency,
   measured on the fixtures at 0.07–0.65 ms (4.3 ms for one quiche client, whose first
   packet is logged before its socket sends), always making qlog times late;
5. otherwise times stay on the qlog's own origin and a note says so.

When (1) and (2) are both possible they are compared and a disagreement over 1 ms is
noted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

#: Above this many µs a clock reading is taken for an epoch (wall) value (1973-03).
EPOCH_MIN_US = 1e14
_MONO_DESC = re.compile(r"reference_time_monotonic_us=(\d+)")
#: qlog event names that mark a datagram leaving (the first one is used by `link`).
SEND_NAMES = ("transport:datagram_sent", "transport:datagrams_sent", "quic:datagrams_sent",
              "transport:packet_sent", "quic:packet_sent")


@dataclass(frozen=True)
class Clock:
    """t_model_us = raw_time * scale + offset_us."""

    scale: float
    offset_us: float
    method: str


def time_unit_us(meta: dict[str, Any], header: dict[str, Any]) -> float:
    """µs per unit of the file's event times: draft-00 `time_units`, else ms."""
    conf = meta.get("configuration") or header.get("configuration") or {}
    unit = conf.get("time_units") if isinstance(conf, dict) else None
    # A unit that is no string (a broken file's list or object) is no unit: ms.
    return {"us": 1.0, "ms": 1000.0, "s": 1e6}.get(unit, 1000.0) if isinstance(unit, str) else 1000.0


def resolve(raw, link_start_unix_ns: int | None, applog: dict[str, Any] | None,
            link_log: Path | None, vantage: str, notes: list[str]) -> Clock:
    """The Clock for one raw trace; appends a note saying which method was used."""
    unit = time_unit_us(raw.meta, raw.header)
    origin_us = _time_offset_us(raw.meta, unit)
    wall = _wall_reference_us(raw.meta, unit)
    mono = _mono_reference_us(raw.meta, raw.header, unit)
    pair = _pair(applog)
    via_mono = mono + pair if mono is not None and pair is not None else None
    if wall is not None and via_mono is not None and abs(wall - via_mono) > 1000:
        notes.append(f"clock: qlog wall reference and monotonic reference + app log differ by "
                     f"{(wall - via_mono) / 1000:.3f} ms; using the qlog's wall reference")
    if link_start_unix_ns is None:
        notes.append("clock: no link start given; times are µs since the qlog's own origin")
        return Clock(unit, origin_us, "unaligned")
    link_us = link_start_unix_ns / 1000
    for base, method in ((wall, "wall"), (via_mono, "monotonic+applog")):
        if base is not None:
            notes.append(f"clock: {method}")
            return Clock(unit, base + origin_us - link_us, method)
    first = _first_time(raw.events, ())
    if wall is None and mono is None and first is not None and first * unit > EPOCH_MIN_US:
        notes.append("clock: epoch (event times are wall-clock values)")
        return Clock(unit, origin_us - link_us, "epoch")
    aligned = _align_by_link(raw.events, unit, link_log, vantage)
    if aligned is not None:
        why = "monotonic reference but no t_us/wall_us pair in the app log" if mono is not None else "no reference"
        notes.append(f"clock: link ({why}); aligned on the first datagram in {link_log}, "
                     "error = the endpoint's send latency")
        return Clock(unit, aligned, "link")
    notes.append("clock: UNALIGNED — no wall reference, no app-log pair, no usable link log; "
                 "times are µs since the qlog's own origin")
    return Clock(unit, origin_us, "unaligned")


def _time_offset_us(meta: dict[str, Any], unit: float) -> float:
    """configuration.time_offset (in the file's time unit) as µs; 0 when absent."""
    conf = meta.get("configuration") or {}
    off = conf.get("time_offset") if isinstance(conf, dict) else None
    return float(off) * unit if isinstance(off, (int, float)) else 0.0


def _reference(meta: dict[str, Any]) -> Any:
    """common_fields.reference_time as logged (number, string or clock object)."""
    common = meta.get("common_fields") or {}
    return common.get("reference_time") if isinstance(common, dict) else None


def _wall_reference_us(meta: dict[str, Any], unit: float) -> float | None:
    """The wall-clock µs of the time origin, if the qlog states one."""
    ref = _reference(meta)
    if isinstance(ref, dict):
        if isinstance(ref.get("wall_clock_time"), str):
            return parse_rfc3339_us(ref["wall_clock_time"])
        if ref.get("clock_type") == "system" and str(ref.get("epoch", "")).startswith("1970-01-01"):
            return 0.0
        return None
    value = _number(ref)
    return value * unit if value is not None and value * unit > EPOCH_MIN_US else None


def _mono_reference_us(meta: dict[str, Any], header: dict[str, Any], unit: float) -> float | None:
    """The CLOCK_MONOTONIC µs of the time origin, if the qlog (or our description field) states one."""
    value = _number(_reference(meta))
    # 0 names no clock (ngtcp2 writes reference_time 0 with relative times): a
    # CLOCK_MONOTONIC origin of 0 would be the boot instant.
    if value is not None and 0 < value * unit <= EPOCH_MIN_US:
        return value * unit
    for d in (meta, header):
        m = _MONO_DESC.search(str(d.get("description", "")))
        if m:
            return float(m.group(1))
    return None


def _number(v: Any) -> float | None:
    """A number or numeric string as float; None otherwise (bools too)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _pair(applog: dict[str, Any] | None) -> float | None:
    """wall − monotonic in µs from the version record, or None without both."""
    if not applog:
        return None
    t, w = applog.get("t_us"), applog.get("wall_us")
    if isinstance(t, (int, float)) and isinstance(w, (int, float)) and not isinstance(t, bool):
        return float(w) - float(t)
    return None


def parse_rfc3339_us(s: str) -> float | None:
    """µs since the epoch of an RFC 3339 time with up to ns digits (None if malformed)."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", s.strip())
    if not m:
        return None
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    try:
        whole = datetime.fromisoformat(m.group(1) + tz).timestamp()
    except ValueError:
        return None
    frac = m.group(2) or "0"
    return round(whole) * 1e6 + int(frac) / 10 ** len(frac) * 1e6


def _first_time(events: Iterable[dict[str, Any]], names: tuple[str, ...]) -> float | None:
    """Time of the first event (of one of `names`, if given)."""
    for e in events:
        if not names or e.get("name") in names:
            t = e.get("time")
            if isinstance(t, (int, float)):
                return float(t)
    return None


def _align_by_link(events: list[dict[str, Any]], unit: float, link_log: Path | None, vantage: str) -> float | None:
    """Offset (µs) putting the trace's first datagram on the link's matching record."""
    if link_log is None:
        return None
    first = _first_time(events, SEND_NAMES)
    link_t = _first_arrival(link_log, "c2s" if vantage == "client" else "s2c")
    if first is None or link_t is None:
        return None
    return link_t - first * unit


def _first_arrival(link_log: Path, direction: str, max_lines: int = 10000) -> float | None:
    """When the first UDP datagram in `direction` reached the link."""
    try:
        with open(link_log, "rb") as f:
            f.readline()  # header
            for _, line in zip(range(max_lines), f):
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if isinstance(r, dict) and r.get("dir") == direction and r.get("proto", "udp") == "udp":
                    return _number(r.get("arr_us"))
    except OSError:
        return None
    return None
