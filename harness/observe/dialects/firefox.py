"""Firefox (Debian firefox-esr 153; its QUIC stack is neqo): JSON-SEQ qlog 0.3,
`transport:*` / `recovery:*` names, written by neqo under $TMPDIR/qlog_<pid>/ and moved
into QLOGDIR by our endpoint.

As logged: `common_fields.reference_time` in ms since the Unix epoch with relative
event times (clock "wall"); packet_sent and packet_received with their frames (ACK
frames with acked_ranges, so packet_acked is derived as for every stack; neqo's own
`transport:packets_acked` agrees and is not read); packet_lost with its trigger
(reordering_threshold / time_threshold); recovery:metrics_updated with only what
changed (congestion_window, ssthresh, bytes_in_flight, RTTs in ms);
congestion_state_updated with the draft's names (slow_start, congestion_avoidance,
recovery). recovery:parameters_set gives the constants (initial window 10 × 1252 B,
loss_reduction_factor 0.5 for NewReno). No loss-timer events and no pto_count: PTO
expiries come from the wire.
"""

from __future__ import annotations

from harness.observe.dialects._base import CAPABILITIES, Dialect


class FirefoxDialect(Dialect):
    """neqo's qlog is the draft's; it only lacks PTO events."""

    stack = "firefox"
    LOGS = CAPABILITIES - {"pto_expired"}
    FACTS = ("firefox: neqo logs no loss-timer events and no pto_count (PTO expiries from the wire)",)
