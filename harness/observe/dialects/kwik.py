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
has not yet reduced: an ACK frame's acknowledgements are placed at the first
metrics with an RTT estimate that follows its packet, where kwik handled it.
"""

from __future__ import annotations

from typing import Any

from harness.observe.dialects._base import CAPABILITIES, Dialect, _Walk

#: The longest an ACK frame waits for the metrics its handling logs (µs); past it the
#: frame stays where its packet was logged.
HANDLING_WAIT_US = 50_000.0


class KwikDialect(Dialect):
    """kwik's trace: standard names; no states, ssthresh, triggers or PTO counts."""

    stack = "kwik"
    LOGS = CAPABILITIES - {"congestion_state", "pto_expired", "min_rtt"}
    # The hook passes a packet's own instant (received, queued to send) and none with
    # metrics, which Qlog.java stamps at the call: file order is kwik's order.
    file_order_is_causal = True
    # kwik 0.10.8's NewReno sets ssthresh in one place, its congestion event, which
    # halves the logged window; it has no HyStart. A stall in slow start is its
    # application-limited rule (it grows only on ACKs that found the window full to
    # within 3 bytes), not an exit.
    unset_ssthresh_is_infinite = True
    # A send-thread report lands anywhere between an ACK's packet and its handling's
    # metrics: as long as a receive thread preempted in between (BENCHMARKS.md, kwik).
    LOG_ORDER_SLACK_US = 5_000.0
    FACTS = (
        "kwik: no congestion states logged (left to harness/observe/states.py)",
        "kwik: no ssthresh, loss trigger, PTO count or min_rtt; RTTs in whole ms; the trace is written by our endpoint",
    )

    def on_received(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        first = len(w.acks)
        super().on_received(w, t, d)
        w.pending_acks += range(first, len(w.acks))

    def on_metrics(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        if w.pending_acks and "smoothed_rtt" in d:
            # The recovery manager's metrics after it handled the frame: the frame's
            # acknowledgements take effect here, before them.
            for i in w.pending_acks:
                t_ack, space, ranges = w.acks[i]
                if t - t_ack <= HANDLING_WAIT_US:
                    w.acks[i], w.ack_pos[i] = (t, space, ranges), len(w.events)
            w.pending_acks.clear()
        super().on_metrics(w, t, d)
