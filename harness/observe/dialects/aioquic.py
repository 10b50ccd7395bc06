"""aioquic (1.7.x): qlog 0.3 JSON, one document per connection written at its end.

Deviations from the draft, as logged:
- times are time.time() in ms since the epoch, with no reference_time (clock "epoch");
- recovery:metrics_updated names the window `cwnd`; RTTs in ms as the draft says;
  no pto_count, no pacing_rate;
- recovery:packet_lost has `type` and `packet_number` at the top level, no header
  and no trigger;
- a PTO makes aioquic declare the oldest unacknowledged packet lost (its
  reschedule_data; not a congestion event), so PTO probes also appear as
  packet_lost. Only a PTO declares a packet above the largest acknowledged one, so
  those are counted in a note (states.py can use the same rule);
- no congestion states, no loss-timer events, no pto_count (PTO expiries come from
  the capture: harness/observe/probes.py); the file is written whole when the
  connection ends, so a killed aioquic leaves no qlog at all.
"""

from __future__ import annotations

from harness.observe import events as ev
from harness.observe.dialects._base import DRAFT_CAPABILITIES, Dialect, _Walk


class AioquicDialect(Dialect):
    """aioquic's deviations: `cwnd`, header-less packet_lost, PTO losses (module docstring)."""

    stack = "aioquic"
    LOGS = DRAFT_CAPABILITIES - {"congestion_state", "pto_expired"}
    METRICS = {**Dialect.METRICS, "cwnd": ("congestion_window", "size")}
    FACTS = (
        "aioquic: no congestion states logged (left to harness/observe/states.py)",
        "aioquic: packet_lost has no trigger; PTO-declared losses are logged as packet_lost too",
    )

    def _summary(self, w: _Walk) -> list[str]:
        """The draft's notes plus the count of PTO-declared losses."""
        out = super()._summary(w)
        n = pto_like_losses(w)
        if n:
            out.append(f"aioquic: {n} packet_lost above the largest acknowledged packet number at the "
                       "time, i.e. declared by a PTO, not by the loss detector")
        return out


def pto_like_losses(w: _Walk) -> int:
    """Losses of packets above the largest acknowledged pn of their space at that time."""
    largest: dict[str, int] = {}
    acks = sorted(w.acks, key=lambda a: a[0])
    i, n = 0, 0
    for e in sorted((e for e in w.events if isinstance(e, ev.PacketLost)), key=lambda e: e.t_us):
        while i < len(acks) and acks[i][0] <= e.t_us:
            t, space, ranges = acks[i]
            for r in ranges if isinstance(ranges, list) else ():
                try:
                    largest[space] = max(largest.get(space, -1), int(r[-1]))
                except (TypeError, ValueError, IndexError, KeyError):
                    pass
            i += 1
        if e.pn > largest.get(e.space, -1):
            n += 1
    return n
