"""kwik (0.10.8): the qlog our endpoint writes from kwik's QLog hook.

kwik's core calls a QLog interface whose writer is not published; our endpoint
(harness/endpoints/kwik/src/main/java/longlook/kwik/Qlog.java) writes qlog 0.3 JSON-SEQ
with `transport:*` / `recovery:*` names, a wall-clock reference_time and
reference_time_monotonic_us in the description (clock "wall"). RTTs are whole ms, as
kwik keeps them. Absent: congestion states, ssthresh, loss triggers, PTO counts or
timer events (PTO expiries come from the wire), min_rtt (kwik's hook passes the
smoothed and latest RTT and the variance, not the minimum it keeps privately), and the
client's received packets.
"""

from __future__ import annotations

from harness.observe.dialects._base import CAPABILITIES, Dialect


class KwikDialect(Dialect):
    """kwik's trace: standard names; no states, ssthresh, triggers or PTO counts."""

    stack = "kwik"
    LOGS = CAPABILITIES - {"congestion_state", "pto_expired", "min_rtt"}
    FACTS = (
        "kwik: no congestion states logged (left to harness/observe/states.py)",
        "kwik: no ssthresh, loss trigger, PTO count or min_rtt; RTTs in whole ms; the trace is written by our endpoint",
    )
