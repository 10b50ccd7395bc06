"""s2n-quic (1.91.0): the qlog our endpoint writes from s2n-quic's event subscriber.

s2n-quic has no qlog writer; harness/endpoints/rust/s2n-quic-endpoint/src/qlog.rs maps
its events to qlog 0.3 JSON-SEQ (`transport:*` / `recovery:*` names, RTTs in ms,
reference_time_monotonic_us in the description; clock "monotonic+applog"). What the
events do not carry is absent: no ssthresh, no congestion states (s2n-quic reports
a congestion event and a slow-start exit, not a state), no loss trigger, no timer
events. PTO expiries come from rises of pto_count in the metrics, as for quinn;
states are left to harness/observe/states.py.
"""

from __future__ import annotations

from harness.observe.dialects._base import DRAFT_CAPABILITIES, Dialect


class S2nQuicDialect(Dialect):
    """s2n-quic's trace: standard names and units; no states, ssthresh or loss triggers."""

    stack = "s2n-quic"
    LOGS = DRAFT_CAPABILITIES - {"congestion_state"}
    FACTS = (
        "s2n-quic: no congestion states logged (left to harness/observe/states.py)",
        "s2n-quic: no ssthresh or loss trigger in its events; the trace is written by our endpoint",
    )
