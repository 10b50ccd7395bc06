"""picoquic (1.1.x, through aiopquic): qlog draft-00 JSON, events as arrays.

Deviations, as logged:
- `event_fields` arrays, `configuration.time_units` "us": event times AND RTTs are
  µs (draft-00 allowed this); `common_fields.reference_time` is a string holding
  CLOCK_MONOTONIC µs under aiopquic (wall-clock µs in picoquic's own tools — the
  magnitude tells them apart), so the clock needs the app log's t_us/wall_us pair,
  else the link log (clock "link");
- metrics_updated names the window `cwnd`, logs only what changed, pacing_rate in
  bit/s, plus `app_limited` (0/1, not in the model);
- packet_lost triggers are picoquic's own: "timer" (retransmit timer expired →
  pto_expired) and "repeat" (packet- or time-threshold, not distinguished → None);
- congestion_state_updated `new`/`old` are the algorithm's internal state numbers;
  the table depends on the CC (from the app log's version record `cc`): newreno and
  prague 0 SlowStart, 1 CongestionAvoidance; cubic and dcubic 0 SlowStart,
  1 Recovery, 2 CongestionAvoidance; BBR, fast, c4 pack other values → not mapped.
  Only changes are logged: the initial SlowStart is not;
- spurious losses are not logged per packet; the closing info message
  "Closed. Retrans= N, spurious= M" gives totals, which are noted;
- event times are not monotonic in file order (a packet_dropped is logged at its
  receive time after later events);
- the metrics_updated an ACK frame causes comes before that frame's packet_acked
  and packet_lost events (same instant): `window_before_acks`.
"""

from __future__ import annotations

import re
from typing import Any

from harness.observe.dialects._base import Dialect, _Walk

_CLOSE_STATS = re.compile(r"Retrans= *(\d+), spurious= *(\d+)")

#: picoquic CC name (LL_CC / registry) → its numeric state → the model's state.
STATE_TABLES: dict[str, dict[str, str]] = {
    "newreno": {"0": "SlowStart", "1": "CongestionAvoidance"},
    "prague": {"0": "SlowStart", "1": "CongestionAvoidance"},
    "cubic": {"0": "SlowStart", "1": "Recovery", "2": "CongestionAvoidance"},
    "dcubic": {"0": "SlowStart", "1": "Recovery", "2": "CongestionAvoidance"},
}


class PicoquicDialect(Dialect):
    """picoquic's deviations: draft-00 µs units, `cwnd`, own triggers, numeric states."""

    stack = "picoquic"
    rtt_us = None  # the file's time unit (µs)
    window_before_acks = True
    METRICS = {**Dialect.METRICS, "cwnd": ("congestion_window", "size")}
    TRIGGERS = {"timer": "pto_expired", "repeat": None, **{t: t for t in Dialect.TRIGGERS}}

    def prepare(self, w: _Walk, raw, ctx, notes: list[str]) -> None:
        """RTTs in the file's unit; the state table of the run's CC (app log `cc`)."""
        super().prepare(w, raw, ctx, notes)
        cc = str((ctx.applog or {}).get("cc") or "").lower()
        if cc == "reno":
            cc = "newreno"
        table = STATE_TABLES.get(cc)
        if table is None:
            why = "no app log version record with `cc`" if not cc else f"cc {cc!r} packs its states"
            notes.append(f"picoquic: numeric congestion states not mapped ({why})")
            table = {}
        else:
            notes.append(f"picoquic: numeric congestion states read with the {cc} table")
        w.states = table
        notes.append("picoquic: packet_lost trigger 'repeat' (packet or time threshold) → None, "
                     "'timer' → pto_expired")

    def __init__(self) -> None:
        """The draft's handlers plus info:message (close statistics)."""
        super().__init__()
        self.handlers["info:message"] = self.on_message

    def on_message(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """Notes the retransmission/spurious totals of the closing message."""
        m = _CLOSE_STATS.search(str(d.get("message", "")))
        if m:
            w.extra_notes.append(f"picoquic: at close, {m.group(1)} retransmissions of which "
                                 f"{m.group(2)} spurious (totals from its info message)")

    def trigger(self, w: _Walk, raw):
        """'timer' → pto_expired; 'repeat' → None without a warning."""
        # 'repeat' is a known picoquic trigger, deliberately None: not worth a warning.
        if raw == "repeat":
            return None
        return super().trigger(w, raw)
