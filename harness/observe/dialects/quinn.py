"""quinn (0.11.12, quinn-proto 0.11.19): JSON-SEQ, `recovery:*` / `transport:*` names.

As logged: no reference_time (our endpoint writes `reference_time_monotonic_us=N`
into the description; clock "monotonic+applog"); vantage_point type "unknown";
RTT fields in SECONDS (f32, `as_secs_f32`) although qlog says ms — detected here
from the values (the first smoothed_rtt is quinn's 0.333 s initial RTT, and every
RTT < 1) and noted; metrics log only what changed, ssthresh u64::MAX before the first
loss, pacing_rate only with BBR (bit/s); packet_sent/received carry only the header (no frames), so
packet_acked cannot be derived from quinn's qlog; packet_lost always says
reordering_threshold (quinn-proto compares `time_sent.saturating_duration_since(now)`,
which is always 0), so the trigger is dropped; no congestion states, no timer
events (pto_expired derived from pto_count).
"""

from __future__ import annotations

from typing import Any

from harness.observe.dialects._base import DRAFT_CAPABILITIES, Dialect, _Walk

#: quinn's default initial RTT, which its first metrics event reports.
INITIAL_RTT_S = 0.333


class QuinnDialect(Dialect):
    """quinn's deviations: RTTs in seconds, bogus triggers, no frames."""

    stack = "quinn"
    LOGS = DRAFT_CAPABILITIES - {"ack_frames", "congestion_state"}
    FACTS = (
        "quinn: no frames logged, so no packet_acked (needs the wire view)",
        "quinn: packet_lost trigger always 'reordering_threshold' (quinn-proto bug) → None",
        "quinn: no congestion states logged (left to harness/observe/states.py)",
    )

    def prepare(self, w: _Walk, raw, ctx, notes: list[str]) -> None:
        """Decides the RTT unit from the values (seconds in quinn 0.11)."""
        super().prepare(w, raw, ctx, notes)
        rtts = rtt_values(raw.events)
        if rtts and (abs(rtts[0] - INITIAL_RTT_S) < 1e-3 or max(rtts) < 1.0):
            w.rtt_scale = 1e6
            notes.append(f"quinn: RTTs are in seconds (first smoothed_rtt {rtts[0]}, max {max(rtts)}); ×1e6")
        elif rtts:
            notes.append(f"quinn: RTTs look like ms (first smoothed_rtt {rtts[0]}); read as ms")

    def trigger(self, w: _Walk, raw: Any) -> None:
        """Always None: quinn-proto's trigger is always reordering_threshold."""
        return None


def rtt_values(events: list[dict[str, Any]]) -> list[float]:
    """smoothed_rtt values of the metrics events, in file order."""
    out = []
    for e in events:
        data = e.get("data") if e.get("name") == "recovery:metrics_updated" else None
        # Any shape may come in (a broken file): what is not an object is no metric.
        v = data.get("smoothed_rtt") if isinstance(data, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(float(v))
    return out
