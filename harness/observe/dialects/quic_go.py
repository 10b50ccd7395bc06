"""quic-go (0.65): JSON-SEQ, `recovery:*` / `transport:*` names.

As logged: the header declares event schema `quic-14` (whose names are `quic:*`),
but events keep the qlog 0.3 names; reference_time is monotonic with
`wall_clock_time` (clock "wall"); RTTs in ms; metrics_updated carries
congestion_window, bytes_in_flight, packets_in_flight and RTTs, pto_count in separate
metrics_updated events; congestion_state_updated `new` ∈ slow_start,
congestion_avoidance, recovery, application_limited; packet_lost triggers
reordering_threshold / time_threshold; recovery:loss_timer_updated (expired pto →
pto_expired); recovery:spurious_loss when a declared loss is later acknowledged. No
ssthresh, no pacing_rate. The qlog only exists when the tracer is set in code (our
endpoint does).
"""

from __future__ import annotations

from harness.observe.dialects._base import Dialect


class QuicGoDialect(Dialect):
    """quic-go follows the draft's 0.3 names and fields, but logs packet_received
    once it has handled the packet's frames (connection.go, handleFrames: the
    frames are collected and logged after the loop that handles them), so its ACK
    frames' effects precede them in the file."""

    stack = "quic-go"
    received_after_handling = True
    FACTS = ("quic-go: no ssthresh or pacing_rate in metrics_updated",)
