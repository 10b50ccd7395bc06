"""kwik (0.10.8): the qlog our endpoint writes from kwik's QLog hook.

kwik's core calls a QLog interface whose writer is not published; our endpoint
(harness/endpoints/kwik/src/main/java/longlook/kwik/Qlog.java) writes qlog 0.3 JSON-SEQ
with `transport:*` / `recovery:*` names, a wall-clock reference_time and
reference_time_monotonic_us in the description (clock "wall"). RTTs are whole ms, as
kwik keeps them. Absent: congestion states, ssthresh, loss triggers, PTO counts or
timer events (PTO expiries come from the wire), min_rtt (kwik's hook passes the
smoothed and latest RTT and the variance, not the minimum it keeps privately), and the
client's received packets. Packet events carry the instant kwik took for the packet
(its receipt, its queueing to send), metrics the moment of the hook's call; under load
the two differ by milliseconds, so the trace is read monotone in file order, which is
the order kwik acted in (Dialect.file_order_is_causal).

kwik's receive thread logs a packet as it takes it up, then hands each ACK frame to
its recovery manager, which logs the window, bytes in flight and RTT estimate
(emitRecoveryMetrics) once the frame is handled; its send thread logs the window and
bytes in flight (emitCongestionControlMetrics) at each send. A receive thread
preempted between the two lets sends in between report bytes in flight that the ACK
has not yet reduced, or already has: the ACK's acknowledgements stay where its packet
was logged (the losses it reveals follow them), and the window and bytes in flight are
read from the recovery manager's reports alone (a send-thread snapshot can still show
the window from before a loss the receive thread has just cut it for).
"""

from __future__ import annotations

from typing import Any

from harness.observe.dialects._base import DRAFT_CAPABILITIES, Dialect, _Walk


class KwikDialect(Dialect):
    """kwik's trace: standard names; no states, ssthresh, triggers or PTO counts."""

    stack = "kwik"
    LOGS = DRAFT_CAPABILITIES - {"congestion_state", "pto_expired", "min_rtt"}
    # The hook passes a packet's own instant (received, queued to send) and none with
    # metrics, which Qlog.java stamps at the call: file order is kwik's order.
    file_order_is_causal = True
    # kwik 0.10.8's NewReno sets ssthresh in one place, its congestion event, which
    # halves the logged window; it has no HyStart. A stall in slow start is its
    # application-limited rule (it grows only on ACKs that found the window full to
    # within 3 bytes), not an exit.
    unset_ssthresh_is_infinite = True
    # The send thread logs its packets while the receive thread handles an ACK and
    # writes its report: the two interleave by milliseconds under load (BENCHMARKS.md).
    LOG_ORDER_SLACK_US = 5_000.0
    # After each ACK frame the recovery manager reports (metrics with an RTT estimate,
    # the only metrics read): losses the ACK revealed are logged by then.
    reports_after_handling = True
    FACTS = (
        "kwik: no congestion states logged (left to harness/observe/states.py)",
        "kwik: no ssthresh, loss trigger, PTO count or min_rtt; RTTs in whole ms; the trace is written by our endpoint",
        "kwik: read monotone in file order; after the first ACK, window and bytes in flight from the recovery "
        "manager's reports only (send-thread snapshots left out)",
    )

    def on_metrics(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        if "smoothed_rtt" in d:
            w.counters["kwik_reports"] = w.counters.get("kwik_reports", 0) + 1
        elif w.counters.get("kwik_reports"):
            # Metrics without an RTT estimate come from a send (the send thread's
            # snapshot) or a loss. Once ACKs are being handled, a snapshot can predate
            # what the receive thread has just done, or already show an ACK whose
            # packet was logged up to tens of ms before (BENCHMARKS.md: p99 21 ms
            # between an ACK's packet and its handling's report on the loaded 2-core
            # host): window and bytes in flight are then read from the recovery
            # manager's report after each ACK frame alone, written in order with the
            # acknowledgements and losses it follows. Before the first ACK there is
            # nothing to race: the first flight's snapshots (the initial window) stay.
            return
        super().on_metrics(w, t, d)
