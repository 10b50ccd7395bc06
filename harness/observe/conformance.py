"""qlog conformance: how a stack's qlog deviates from the qlog drafts, and implausible values.

Checked on the raw file (harness.observe.qlog.read_raw), not on the normalised
trace, so a dialect's repairs cannot hide a deviation. Reference: qlog main schema
0.3 / draft-ietf-quic-qlog-main-schema and the QUIC event definitions
(draft-ietf-quic-qlog-quic-events): times and RTTs in ms unless declared otherwise,
pacing_rate in bit/s, packet events with a `header` holding packet_type and
packet_number, packet_lost triggers reordering_threshold / time_threshold /
pto_expired, congestion states as strings.

`check_file` / `check_run` return `Finding`s: (stack, check, message, source). Check
names are stable identifiers (tests assert on them); docs/trace.md lists what each
stack is known to trigger.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from harness.observe import qlog
from harness.observe.dialects._clock import time_unit_us
from harness.observe.events import TRIGGERS

KNOWN_VERSIONS = ("0.3", "0.4", "draft-00", "draft-01", "draft-02")
PACKET_EVENTS = ("packet_sent", "packet_received")
#: Packet types that carry no packet number.
NO_PN_TYPES = ("version_negotiation", "retry", "stateless_reset")
DRAFT_METRICS = frozenset(("min_rtt", "smoothed_rtt", "latest_rtt", "rtt_variance", "pto_count",
                           "congestion_window", "bytes_in_flight", "ssthresh", "packets_in_flight",
                           "pacing_rate"))
RTT_FIELDS = ("latest_rtt", "min_rtt", "smoothed_rtt")
#: An RTT this many times off the link's configured RTT means a wrong unit.
RTT_FACTOR = 20
SENTINEL = 1 << 62


@dataclass(frozen=True)
class Finding:
    """One deviation: which stack, which check (a stable name), what, in which file."""

    stack: str
    check: str
    message: str
    source: str = ""


def check_run(run_dir: str | Path, stack: str) -> list[Finding]:
    """Findings for every qlog file of a `longlook transfer --out` directory."""
    run_dir = Path(run_dir)
    rtt_us = link_rtt_us(run_dir / "link.ndjson")
    out: list[Finding] = []
    for vantage in ("client", "server"):
        for q in sorted((run_dir / vantage / "qlog").glob("*")):
            if q.is_file():
                out += check_file(q, stack, rtt_us)
    return out


def check_file(path: str | Path, stack: str, link_rtt_us: float | None = None) -> list[Finding]:
    """Findings for one qlog file; an unreadable file is itself one finding."""
    try:
        raws = qlog.read_raw(path)
    except qlog.QlogError as e:
        return [Finding(stack, "readable", str(e), str(path))]
    out: list[Finding] = []
    for raw in raws:
        try:
            for check, message in _checks(raw, link_rtt_us):
                out.append(Finding(stack, check, message, raw.source))
        except Exception as e:  # a checker bug must not hide the other findings
            out.append(Finding(stack, "checker_error", f"{type(e).__name__}: {e}", raw.source))
    return out


def link_rtt_us(link_log: Path) -> float | None:
    """The configured base RTT (sum of both directions' delay in the first phase)."""
    try:
        with open(link_log, "rb") as f:
            phase = json.loads(f.readline())["schedule"]["phases"][0]
        return float(phase["c2s"]["delay_us"] + phase["s2c"]["delay_us"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


# ------------------------------------------------------------------------ checks


def _checks(raw, link_rtt: float | None) -> Iterable[tuple[str, str]]:
    """(check, message) for every deviation of one raw trace."""
    if raw.partial:
        yield "complete", "; ".join(raw.notes) or "file is partial"
    yield from _check_header(raw)
    by_name = _by_kind(raw.events)
    yield from _check_schema_names(raw)
    yield from _check_time(raw.events)
    yield from _check_packets(by_name)
    yield from _check_lost(by_name)
    yield from _check_metrics(by_name, time_unit_us(raw.meta, raw.header), link_rtt)
    yield from _check_states(by_name)


def _kind(name: Any) -> str:
    """The event's name without category, quic:recovery_* folded onto recovery names."""
    s = str(name)
    short = s.split(":", 1)[-1]
    if s.startswith("quic:recovery_"):
        short = short[len("recovery_"):]
    return short


def _by_kind(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Events grouped by _kind."""
    out: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        if isinstance(e, dict):
            out.setdefault(_kind(e.get("name")), []).append(e)
    return out


def _time(e: dict[str, Any]) -> float:
    """The event's time, 0 when absent or not a number (ordering only)."""
    t = e.get("time")
    return float(t) if isinstance(t, (int, float)) else 0.0


def _data(e: dict[str, Any]) -> dict[str, Any]:
    """The event's data object ({} when absent or not an object)."""
    d = e.get("data")
    return d if isinstance(d, dict) else {}


def _check_header(raw) -> Iterable[tuple[str, str]]:
    """Format version, vantage point and time reference."""
    version = raw.header.get("qlog_version")
    if raw.format == "draft-00" or version == "draft-00":
        yield "format", "qlog draft-00: events are arrays described by event_fields (current drafts use objects)"
    elif version is None and "file_schema" not in raw.header:
        yield "format", "no qlog_version or file_schema in the header"
    elif version is not None and str(version) not in KNOWN_VERSIONS:
        yield "format", f"unknown qlog_version {version!r}"
    vp = raw.meta.get("vantage_point")
    vtype = vp.get("type") if isinstance(vp, dict) else None
    if vtype not in ("client", "server"):
        yield "vantage_point", f"vantage_point.type is {vtype!r}, not client or server"
    common = raw.meta.get("common_fields") if isinstance(raw.meta.get("common_fields"), dict) else {}
    ref = common.get("reference_time")
    first = next((e.get("time") for e in raw.events if isinstance(e, dict)), None)
    if ref is None and not (isinstance(first, (int, float)) and first > 1e11):
        # Absolute epoch times without a reference (aioquic) are what qlog 0.3 prescribes.
        yield "reference_time", "no common_fields.reference_time and times are not epoch values: origin unknown"
    elif isinstance(ref, str):
        yield "reference_time", f"reference_time is a string ({ref!r}, draft-00 style), not a number or clock object"


def _check_schema_names(raw) -> Iterable[tuple[str, str]]:
    """A declared quic-NN event schema whose quic:* names the events do not use."""
    schemas = raw.meta.get("event_schemas") or raw.header.get("event_schemas") or []
    if not any("qlog:events:quic" in str(s) for s in schemas):
        return
    old = Counter(str(e.get("name")).split(":", 1)[0] for e in raw.events
                  if str(e.get("name", "")).startswith(("transport:", "recovery:", "connectivity:", "security:")))
    if old:
        yield "event_names", (f"declares {', '.join(map(str, schemas))} (names quic:*) but logs "
                              f"{sum(old.values())} events with qlog 0.3 categories {dict(old)}")


def _check_time(events: list[dict[str, Any]]) -> Iterable[tuple[str, str]]:
    """Every event has a time, and times do not go backwards in file order."""
    prev, back, first_at, bad = None, 0, None, 0
    for i, e in enumerate(events):
        t = e.get("time") if isinstance(e, dict) else None
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            bad += 1
            continue
        if prev is not None and t < prev:
            back += 1
            first_at = first_at if first_at is not None else (i, prev, t)
        prev = t
    if bad:
        yield "time_present", f"{bad} event(s) without a numeric time"
    if back:
        i, p, t = first_at
        yield "time_monotonic", f"{back} event(s) earlier than the one before (first: event #{i}, {t} after {p})"


def _check_packets(by: dict[str, list[dict[str, Any]]]) -> Iterable[tuple[str, str]]:
    """packet_sent/received carry a header with packet_type and packet_number, and frames."""
    missing, outside, no_frames, total = Counter(), 0, 0, 0
    for kind in PACKET_EVENTS:
        for e in by.get(kind, ()):
            d = _data(e)
            total += 1
            hdr = d.get("header") if isinstance(d.get("header"), dict) else None
            if hdr is None:
                missing["header"] += 1
                continue
            ptype = hdr.get("packet_type")
            if ptype is None and "packet_type" in d:
                outside += 1
                ptype = d["packet_type"]
            if ptype is None:
                missing["packet_type"] += 1
            if ptype not in NO_PN_TYPES and "packet_number" not in hdr:
                missing["packet_number"] += 1
            if "frames" not in d:
                no_frames += 1
    if missing:
        yield "required_fields", f"packet_sent/received missing {dict(missing)} of {total}"
    if outside:
        yield "packet_type_placement", f"{outside} packet events carry packet_type beside the header, not in it"
    if no_frames and total:
        yield "frames", f"{no_frames} of {total} packet events log no frames (ACKs and retransmissions invisible)"


def _check_lost(by: dict[str, list[dict[str, Any]]]) -> Iterable[tuple[str, str]]:
    """packet_lost: header, a trigger from the draft's set that can be right, and its presence."""
    lost = by.get("packet_lost", [])
    triggers, no_hdr = Counter(), 0
    for e in lost:
        d = _data(e)
        triggers[str(d.get("trigger"))] += 1
        if not isinstance(d.get("header"), dict):
            no_hdr += 1
    if no_hdr:
        yield "packet_lost_fields", f"{no_hdr} packet_lost without header (packet number in non-draft fields)"
    if lost and triggers.get("None"):
        yield "packet_lost_trigger", f"{triggers['None']} of {len(lost)} packet_lost without a trigger"
    odd = {t: n for t, n in triggers.items() if t != "None" and t not in TRIGGERS}
    if odd:
        yield "packet_lost_trigger", f"triggers outside the draft's set: {odd}"
    impossible = _impossible_reordering(by)
    if impossible:
        yield "packet_lost_trigger", (f"{impossible} reordering_threshold losses with fewer than 3 packets "
                                      "sent after them: the trigger cannot be right")
    if not lost:
        counted = _counted_losses(by)
        if counted:
            yield "packet_lost_missing", f"no packet_lost events, yet the stack counts {counted} lost packets"


def _impossible_reordering(by: dict[str, list[dict[str, Any]]]) -> int:
    """packet_lost(reordering_threshold) needs ≥ 3 later packets sent in its space."""
    timeline = sorted([(_time(e), 0, e) for e in by.get("packet_sent", ())]
                      + [(_time(e), 1, e) for e in by.get("packet_lost", ())], key=lambda x: (x[0], x[1]))
    largest: dict[Any, int] = {}
    n = 0
    for _, is_lost, e in timeline:
        d = _data(e)
        hdr = d.get("header") if isinstance(d.get("header"), dict) else {}
        ptype, pn = hdr.get("packet_type"), hdr.get("packet_number")
        if not isinstance(pn, int):
            continue
        if not is_lost:
            largest[ptype] = max(largest.get(ptype, -1), pn)
        elif d.get("trigger") == "reordering_threshold" and largest.get(ptype, -1) - pn < 3:
            n += 1
    return n


def _counted_losses(by: dict[str, list[dict[str, Any]]]) -> int:
    """Losses the stack counts in its own metrics (quiche's cf_lost_packets.total)."""
    best = 0
    for e in by.get("metrics_updated", ()):
        c = _data(e).get("cf_lost_packets")
        if isinstance(c, dict) and isinstance(c.get("total"), int):
            best = max(best, c["total"])
    return best


def _check_metrics(by: dict[str, list[dict[str, Any]]], unit_us: float,
                   link_rtt: float | None) -> Iterable[tuple[str, str]]:
    """Metric names, signs, the ssthresh sentinel and the units of RTTs and pacing."""
    metrics = [_data(e) for e in by.get("metrics_updated", []) + by.get("metric_update", [])]
    extra = Counter(k for d in metrics for k in d if k not in DRAFT_METRICS)
    if extra.get("cwnd"):
        yield "metric_names", f"window logged as `cwnd` ({extra['cwnd']}×); the draft says congestion_window"
    if metrics and not any("congestion_window" in d or "cwnd" in d for d in metrics):
        yield "metric_names", "no congestion_window in any metrics_updated"
    negative = Counter(k for d in metrics for k, v in d.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0)
    if negative:
        yield "non_negative", f"negative metric values: {dict(negative)}"
    sentinel = sum(1 for d in metrics if isinstance(d.get("ssthresh"), int) and d["ssthresh"] >= SENTINEL)
    if sentinel:
        yield "ssthresh_sentinel", f"ssthresh logged as u64::MAX {sentinel}× instead of being omitted"
    findings = list(_check_rtt_units(metrics, unit_us, link_rtt))
    yield from findings
    # Judge pacing with RTTs in their actual unit, or quinn's seconds would look like bytes/s.
    rtt_unit = unit_us * 1000 if any("seconds" in m for _, m in findings) else unit_us
    yield from _check_pacing_units(metrics, rtt_unit)


def _check_rtt_units(metrics: list[dict[str, Any]], unit_us: float,
                     link_rtt: float | None) -> Iterable[tuple[str, str]]:
    """RTT samples against the link's configured RTT: 20× off means a wrong unit."""
    samples = [d[k] * unit_us for d in metrics for k in RTT_FIELDS
               if isinstance(d.get(k), (int, float)) and not isinstance(d.get(k), bool) and d[k] > 0]
    if not samples or not link_rtt:
        return
    med = statistics.median(samples)
    unit = {1.0: "µs", 1000.0: "ms", 1e6: "s"}.get(unit_us, f"{unit_us} µs")
    if med < link_rtt / RTT_FACTOR:
        yield "rtt_units", (f"median RTT {med / 1000:.4f} ms read as {unit}, on a link of {link_rtt / 1000:.1f} ms: "
                            f"RTTs are in a larger unit than declared (seconds? ×{link_rtt / med:.0f})")
    elif med > link_rtt * RTT_FACTOR:
        yield "rtt_units", (f"median RTT {med / 1000:.1f} ms read as {unit}, on a link of {link_rtt / 1000:.1f} ms: "
                            "RTTs are in a smaller unit than declared (µs?)")


def _check_pacing_units(metrics: list[dict[str, Any]], rtt_unit_us: float) -> Iterable[tuple[str, str]]:
    """pacing_rate should be ≈ 8·cwnd/srtt bit/s times a gain of 1–3; ≈ cwnd/srtt means bytes/s."""
    cwnd = srtt = None
    ratios = []
    for d in metrics:
        cwnd = d.get("congestion_window", d.get("cwnd", cwnd))
        srtt = d.get("smoothed_rtt", srtt)
        rate = d.get("pacing_rate")
        if all(isinstance(x, (int, float)) and x > 0 for x in (rate, cwnd, srtt)):
            ratios.append(rate / (cwnd / (srtt * rtt_unit_us / 1e6)))
    if not ratios:
        return
    med = statistics.median(ratios)
    if med < 4:
        yield "pacing_units", f"pacing_rate ≈ {med:.2f}× cwnd/srtt in bytes/s: looks like bytes per second, not bits"


def _check_states(by: dict[str, list[dict[str, Any]]]) -> Iterable[tuple[str, str]]:
    """Congestion states are named, not numbered, and have `new`."""
    states = [_data(e).get("new") for e in by.get("congestion_state_updated", [])]
    numeric = [s for s in states if isinstance(s, (int, float)) or (isinstance(s, str) and s.isdigit())]
    if numeric:
        values = sorted(set(map(str, numeric)))
        yield "congestion_state", f"{len(numeric)} congestion states are numbers ({values}), not names"
    missing = sum(1 for s in states if s is None)
    if missing:
        yield "required_fields", f"{missing} congestion_state_updated without `new`"
