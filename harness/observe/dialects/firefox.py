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
loss_reduction_factor 0.5 for NewReno) before the first packet; its
`initial_congestion_window` is read as the first logged window, since neqo's
metrics_updated logs the window only once it changes. No loss-timer events and no
pto_count: PTO expiries come from the wire.

Order within one instant: neqo logs a received packet (or an expired loss timer),
then what it caused (the RTT, the window cut and the state change into recovery),
then `packets_acked`, then the `packet_lost` events behind the cut. The losses are
put back where their cause is, just after the packet whose ACK declared them (and
after the acknowledgements derived from it) or the timer, so that a cut follows its
losses.
"""

from __future__ import annotations

from typing import Any

from harness.observe import events as ev
from harness.observe.dialects._base import DRAFT_CAPABILITIES, Dialect, _Walk


class FirefoxDialect(Dialect):
    """neqo's qlog is the draft's; it only lacks PTO events."""

    stack = "firefox"
    LOGS = DRAFT_CAPABILITIES - {"pto_expired"}
    FACTS = ("firefox: neqo logs no loss-timer events and no pto_count (PTO expiries from the wire)",)

    def __init__(self) -> None:
        super().__init__()
        self.handlers["recovery:parameters_set"] = self.on_parameters

    def on_received(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """As the draft's, remembering where the packet's effects begin."""
        super().on_received(w, t, d)
        w.neqo_received = (t, len(w.events))

    def on_timer(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """As the draft's; an expired loss timer's effects begin after it, as a
        received packet's do."""
        super().on_timer(w, t, d)
        if d.get("event_type") == "expired":
            w.neqo_received = (t, len(w.events))

    def on_lost(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """A loss declared by the packet received at the same instant goes before the
        effects neqo logged ahead of it."""
        space, pn = self.packet(d)
        if space is None:
            return
        lost = ev.PacketLost(t, pn, space, self.trigger(w, d.get("trigger")))
        received = getattr(w, "neqo_received", None)
        if received is None or received[0] != t:
            w.events.append(lost)
            return
        w.events.insert(received[1], lost)
        w.neqo_received = (t, received[1] + 1)

    def on_parameters(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """The window neqo starts with, as its first metrics."""
        iw = d.get("initial_congestion_window")
        if isinstance(iw, int) and not isinstance(iw, bool):
            self.on_metrics(w, t, {"congestion_window": iw})
