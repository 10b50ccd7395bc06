"""quiche (0.30): JSON-SEQ, the newer `quic:*` names.

As logged: reference_time monotonic with `wall_clock_time` taken with the same
Instant the event times count from (clock "wall"); quic:recovery_metrics_updated
logs only what changed, RTTs in ms, ssthresh u64::MAX before the first loss,
pacing_rate (BBR only) in BYTES per second (×8 here); quiche's own `cf_*` extras
(cf_lost_packets {total, delta}, cf_app_limited, cf_delivery_rate, …);
quic:congestion_state_updated with `new` only: slow_start, conservative_slow_start
(HyStart++ CSS → SlowStart), recovery, congestion_avoidance, or bbr_* (not mapped).
No packet_lost event at all: losses only show as cf_lost_packets, whose total is
noted. No loss-timer events; pto_count appears when it changes.
"""

from __future__ import annotations

from typing import Any

from harness.observe.dialects._base import DRAFT_CAPABILITIES, STANDARD_STATES, Dialect, _Walk


class QuicheDialect(Dialect):
    """quiche's deviations: pacing in bytes/s, CSS state, no packet_lost."""

    stack = "quiche"
    pacing_bps = 8.0
    LOGS = DRAFT_CAPABILITIES - {"packet_lost"} | {"conservative_slow_start"}

    def prepare(self, w: _Walk, raw, ctx, notes: list[str]) -> None:
        """The draft's states plus conservative_slow_start."""
        super().prepare(w, raw, ctx, notes)
        w.states = {**STANDARD_STATES, "conservative_slow_start": "SlowStart"}

    def on_metrics(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """As the draft's, plus the running total of quiche's own loss counter."""
        lost = d.get("cf_lost_packets")
        if isinstance(lost, dict) and isinstance(lost.get("total"), int):
            w.counters["lost"] = max(w.counters.get("lost", 0), lost["total"])
        super().on_metrics(w, t, d)

    def _summary(self, w: _Walk) -> list[str]:
        """The draft's notes plus quiche's own loss count."""
        return super()._summary(w) + [
            f"quiche: no packet_lost events; cf_lost_packets counts {w.counters.get('lost', 0)} loss(es) "
            "(packet numbers unknown from the qlog)"]
