"""tquic (1.6.0): JSON-SEQ, `quic:*` transport names with `recovery:*` ones.

As logged: no reference_time (our endpoint writes `reference_time_monotonic_us=N`
into the description; clock "monotonic+applog"); event times are f32 ms since the
qlog was attached. recovery:metrics_updated logs only what changed, RTTs in ms (the
first smoothed_rtt is tquic's 333 ms initial RTT), pacing_rate already in bit/s, and
never ssthresh or pto_count. packet_received is written after its frames were handled,
so the packet_lost and metrics events its ACK caused precede it in the file.
packet_lost carries the packet number, no trigger. No congestion_state_updated, no
loss-timer events and no PTO count: states are left to harness/observe/states.py, and
PTO expiries to the wire.
"""

from __future__ import annotations

from harness.observe.dialects._base import DRAFT_CAPABILITIES, Dialect


class TquicDialect(Dialect):
    """tquic's deviations: packet_received after its effects; no states, ssthresh or PTO."""

    stack = "tquic"
    received_after_handling = True
    LOGS = DRAFT_CAPABILITIES - {"congestion_state", "pto_expired"}
    FACTS = (
        "tquic: no congestion states logged (left to harness/observe/states.py)",
        "tquic: no ssthresh, pto_count or loss-timer events in its qlog",
    )
