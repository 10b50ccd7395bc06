"""The generic qlog → event-model mapping; each stack's module only states how it differs.

A `Dialect` walks a RawTrace once, dispatching on the event name (both the qlog 0.3
names, `transport:*` / `recovery:*`, and the newer `quic:*` ones), then derives what
the stack does not log but its events imply:

- packet_acked, from the ACK frames of received packets (no stack here logs it);
- pto_expired, from rises of pto_count, only when the trace has no timer events.

Per-event problems (missing fields, wrong types) skip that event and are counted in
one note; nothing raises out of `convert`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable, ClassVar

from harness.observe import events as ev
from harness.observe.dialects import _clock
from harness.observe.dialects._acks import _derive_acks, _insert_at
from harness.observe.dialects._make import _metrics, _sent

#: qlog packet types / packet-number-space names → the model's spaces.
SPACE_OF = {
    "initial": "initial", "handshake": "handshake", "0RTT": "application", "1RTT": "application",
    "application": "application", "application_data": "application", "0rtt": "application", "1rtt": "application",
}
#: Frames that do not make a packet ack-eliciting (RFC 9002 §2).
NON_ELICITING = frozenset(("ack", "padding", "connection_close"))
#: ssthresh values at or above this are a stack's "infinity" sentinel (u64::MAX), not a size.
SENTINEL = 1 << 62
_NUMBER = frozenset((int, float))  # not bool: type(True) is bool
STANDARD_STATES = {
    "slow_start": "SlowStart", "congestion_avoidance": "CongestionAvoidance", "recovery": "Recovery",
    "application_limited": "ApplicationLimited",
}


@dataclass
class Context:
    """What a dialect needs besides the qlog: who logged it and the run's clocks."""

    stack: str
    vantage: str
    link_start_unix_ns: int | None
    applog: dict[str, Any] | None = None
    link_log: Path | None = None


@dataclass
class _Walk:
    """Mutable state of one conversion."""

    clock: _clock.Clock
    #: µs per unit of the trace's RTT fields.
    rtt_scale: float = 1000.0
    #: The stack's raw congestion-state names → the model's STATES.
    states: dict[str, str] = field(default_factory=lambda: dict(STANDARD_STATES))
    events: list[ev.Event] = field(default_factory=list)
    sent: dict[str, set[int]] = field(default_factory=dict)
    acks: list[tuple[float, str, list[Any]]] = field(default_factory=list)
    #: Each received ACK frame's place in `events` (by its index in `acks`), so the
    #: acks derived from it sit where the qlog logged the packet, not after
    #: same-instant events logged later (the final sort by time is stable). By frame,
    #: not by time: a stack with a coarse clock logs several ACKs in one instant.
    ack_pos: list[int] = field(default_factory=list)
    #: Where in `events` the effects of the next received packet begin, for a stack
    #: that logs a packet after handling its frames (Dialect.received_after_handling).
    handled_from: int = 0
    pto_derived: list[ev.PtoExpired] = field(default_factory=list)
    timer_events: int = 0
    last_pto: int = 0
    sentinel_ssthresh: int = 0
    skipped: int = 0
    #: metric field → (model field, multiplier; None: a size or count, kept as int).
    metric_conv: dict[str, tuple[str, float | None]] = field(default_factory=dict)
    unmapped_states: dict[str, int] = field(default_factory=dict)
    unmapped_triggers: dict[str, int] = field(default_factory=dict)
    #: Notes a handler wants added after the walk, and counters a dialect keeps.
    extra_notes: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)


#: The capabilities a dialect may declare: packet_lost events; the ACK frames it
#: received (packet_acked); the congestion window, bytes in flight and smoothed RTT
#: in its metrics; its RTT samples (latest_rtt in its metrics) and its min_rtt
#: (apart: kwik's hook hands out the samples, not the minimum it keeps); congestion
#: states; PTO expiries (a timer event, or pto_count in its metrics); HyStart++'s
#: conservative slow start (RFC 9406 §4.2) named as a state of its own (its `raw`
#: name), which no dialect declares unless the stack logs it (quiche).
CAPABILITIES = frozenset({"packet_lost", "ack_frames", "congestion_window", "bytes_in_flight", "smoothed_rtt",
                          "rtt_samples", "min_rtt", "congestion_state", "pto_expired", "conservative_slow_start"})
#: What the qlog draft's own events carry: all but the extras a stack names itself.
DRAFT_CAPABILITIES = CAPABILITIES - {"conservative_slow_start"}


class Dialect:
    """qlog 0.3 / quic-events as the draft writes them; subclasses override the deviations."""

    stack: ClassVar[str] = "generic"
    #: µs per unit of RTT fields (qlog: ms). None = the file's time unit (draft-00).
    rtt_us: ClassVar[float | None] = 1000.0
    #: bit/s per unit of pacing_rate (qlog: bit/s).
    pacing_bps: ClassVar[float] = 1.0
    #: Whether the window an ACK frame produced is logged before the packets the
    #: frame acknowledges (same instant). Most stacks log it after them, so file
    #: order is cause before effect; consumers that replay the window reorder only
    #: where this is True.
    window_before_acks: ClassVar[bool] = False
    #: Whether the stack logs the losses an ACK frame revealed just before the packets
    #: that frame acknowledged (same instant). Consumers that replay the ACK swap the
    #: two runs: a packet is declared lost only below the largest acknowledged
    #: (RFC 9002 §6.1), so the acknowledgements come first.
    losses_before_acks: ClassVar[bool] = False
    #: Whether the trace shows every setting of ssthresh: logged whenever set (a loss,
    #: HyStart's exit; ngtcp2), or set only by a congestion event, whose reduction the
    #: logged window shows (kwik's NewReno, which has no HyStart). None seen yet then
    #: means it is still infinite: slow start. Otherwise a stall or slow growth before
    #: any ssthresh is logged is read as a slow start that ended without a loss
    #: (harness/observe/states.py; quic-go logs no ssthresh at all).
    unset_ssthresh_is_infinite: ClassVar[bool] = False
    #: Whether the stack logs packet_received after it has handled the packet's
    #: frames, so the events its ACK frames caused (acknowledged packets, the window
    #: they grew, losses they declared, the state they changed) come before it in the
    #: file, timestamped a little earlier. The ACK is then placed where those effects
    #: begin: after the last packet sent, received or timer expired, and no earlier
    #: than HANDLING_US before the packet was logged (a timer's own effects, logged
    #: long before, stay the timer's).
    received_after_handling: ClassVar[bool] = False
    #: Whether the file's order is the order the stack acted in while its times are
    #: not: a hook that stamps packet events with an instant the stack took earlier
    #: (kwik: the moment it received a datagram or queued a packet) and metrics with
    #: the moment of the call, so under load an ACK shows up milliseconds before the
    #: window it grew had been logged. Such a trace is read monotone in file order:
    #: no event earlier than the one written before it.
    file_order_is_causal: ClassVar[bool] = False
    #: Whether the stack logs a received packet before it handles it, and a metrics
    #: report once it has (kwik: its recovery manager's report after each ACK frame):
    #: what an ACK caused is in the log by the first metrics after the ACK, however long
    #: the handling waited for a CPU.
    reports_after_handling: ClassVar[bool] = False
    #: How far apart in its log the stack may write an event and what it did to its
    #: counts (µs): single-threaded stacks microseconds; kwik, whose send thread
    #: reports bytes in flight while its receive thread handles an ACK, milliseconds.
    LOG_ORDER_SLACK_US: ClassVar[float] = 1_000.0
    #: The longest a packet's handling is taken to last (µs): its effects are logged
    #: within it, before the packet itself.
    HANDLING_US: ClassVar[float] = 5_000.0
    #: metric field → (model field, kind) with kind "size", "rtt", "rate" or "count".
    METRICS: ClassVar[dict[str, tuple[str, str]]] = {
        "congestion_window": ("congestion_window", "size"), "bytes_in_flight": ("bytes_in_flight", "size"),
        "ssthresh": ("ssthresh", "size"), "smoothed_rtt": ("smoothed_rtt_us", "rtt"),
        "min_rtt": ("min_rtt_us", "rtt"), "latest_rtt": ("latest_rtt_us", "rtt"),
        "rtt_variance": ("rtt_variance_us", "rtt"), "pacing_rate": ("pacing_rate_bps", "rate"),
        "pto_count": ("pto_count", "count"),
    }
    TRIGGERS: ClassVar[dict[str, str | None]] = {t: t for t in ev.TRIGGERS}
    #: Extra facts about the stack's qlog, added to every trace's notes.
    FACTS: ClassVar[tuple[str, ...]] = ()
    #: What the stack's qlog carries at all, whatever one run happened to show: a
    #: property skips for a capability the stack lacks, before it runs, never for
    #: an event one run did not log (docs/trace.md, "Capabilities").
    LOGS: ClassVar[frozenset[str]] = DRAFT_CAPABILITIES

    def logs(self, capability: str) -> bool:
        """Whether the stack's qlog can carry `capability` (one of CAPABILITIES)."""
        if capability not in CAPABILITIES:
            raise ValueError(f"{capability!r} is no capability; one of {', '.join(sorted(CAPABILITIES))}")
        return capability in self.LOGS

    def __init__(self) -> None:
        """Handlers by full event name: the 0.3 names and the quic:* ones."""
        h = {"packet_sent": self.on_sent, "packet_received": self.on_received, "packet_lost": self.on_lost,
             "metrics": self.on_metrics, "state": self.on_state, "timer": self.on_timer,
             "spurious": self.on_spurious}
        names = {
            "packet_sent": ("transport:packet_sent", "quic:packet_sent"),
            "packet_received": ("transport:packet_received", "quic:packet_received"),
            "packet_lost": ("recovery:packet_lost", "quic:packet_lost"),
            "metrics": ("recovery:metrics_updated", "quic:recovery_metrics_updated", "recovery:metric_update"),
            "state": ("recovery:congestion_state_updated", "quic:congestion_state_updated"),
            "timer": ("recovery:loss_timer_updated", "quic:loss_timer_updated"),
            "spurious": ("recovery:spurious_loss", "quic:spurious_loss"),
        }
        self.handlers: dict[str, Callable[..., None]] = {n: h[k] for k, ns in names.items() for n in ns}

    # ------------------------------------------------------------------ driver

    def convert(self, raw, ctx: Context) -> ev.Trace:
        """One normalised Trace from one RawTrace (never raises for bad content)."""
        notes = list(raw.notes)
        clock = _clock.resolve(raw, ctx.link_start_unix_ns, ctx.applog, ctx.link_log, ctx.vantage, notes)
        w = _Walk(clock)
        self.prepare(w, raw, ctx, notes)
        self._walk(w, raw.events)
        self._derive(w)
        w.events.sort(key=attrgetter("t_us"))  # stable: same-instant events keep file order
        notes += self._summary(w) + list(self.FACTS)
        return ev.Trace(ctx.stack, ctx.vantage, w.events, raw.source, partial=raw.partial, notes=notes)

    def prepare(self, w: _Walk, raw, ctx: Context, notes: list[str]) -> None:
        """Hook run before the walk (units, state table); subclasses extend it."""
        w.rtt_scale = self.rtt_us if self.rtt_us is not None else w.clock.scale

    def _walk(self, w: _Walk, events: list[dict[str, Any]]) -> None:
        """Dispatch every event to its handler, in file order; bad events are counted."""
        handlers, k, off = self.handlers, w.clock.scale, w.clock.offset_us
        factor = {"rtt": w.rtt_scale, "rate": self.pacing_bps}
        w.metric_conv = {key: (name, factor.get(kind)) for key, (name, kind) in self.METRICS.items()}
        monotone, last = self.file_order_is_causal, -math.inf
        for e in events:
            try:
                h = handlers.get(e["name"])
                if h is not None:
                    t = e["time"] * k + off
                    if monotone:
                        t = last = max(t, last)
                    h(w, t, e.get("data") or {})
            except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
                w.skipped += 1

    # ---------------------------------------------------------------- handlers

    def on_sent(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """packet_sent → PacketSent; remembers the pn for the ack derivation."""
        try:
            space, pn = self.packet(d)
            if space is None:
                return
            w.sent.setdefault(space, set()).add(pn)
            frames = d.get("frames")
            eliciting = None if frames is None else any(f.get("frame_type") not in NON_ELICITING for f in frames)
            w.events.append(_sent({"t_us": t, "pn": pn, "space": space, "size": self.size(d),
                                   "ack_eliciting": eliciting}))
        finally:
            w.handled_from = len(w.events)  # what follows a send is no received packet's doing

    def on_received(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """Keeps the ACK frames of a received packet for derive_acks."""
        frames = d.get("frames")
        pos = len(w.events)
        if self.received_after_handling:
            pos, w.handled_from = min(w.handled_from, pos), pos
            while pos < len(w.events) and w.events[pos].t_us < t - self.HANDLING_US:
                pos += 1
            t = w.events[pos].t_us if pos < len(w.events) else t
        if not frames:
            return
        space, _ = self.packet(d, need_pn=False)
        for f in frames:
            if f.get("frame_type") == "ack" and space is not None:
                w.acks.append((t, space, f.get("acked_ranges") or []))
                w.ack_pos.append(pos)

    def on_lost(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """packet_lost → PacketLost with the trigger mapped (None when unknown)."""
        space, pn = self.packet(d)
        if space is None:
            return
        w.events.append(ev.PacketLost(t, pn, space, self.trigger(w, d.get("trigger"))))

    def on_metrics(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """metrics_updated → Metrics in model units; a pto_count rise is kept as a possible PtoExpired."""
        vals: dict[str, Any] = {}
        conv = w.metric_conv
        for key, v in d.items():
            spec = conv.get(key)
            if spec is None or type(v) not in _NUMBER:
                continue
            name, factor = spec
            if factor is not None:
                vals[name] = v * factor
            elif name == "ssthresh" and v >= SENTINEL:
                w.sentinel_ssthresh += 1
            else:
                vals[name] = int(v)
        if not vals:
            return
        pto = vals.get("pto_count")
        vals["t_us"] = t
        w.events.append(_metrics(vals))
        if pto is not None:
            if pto > w.last_pto:
                w.pto_derived.append(ev.PtoExpired(t, pto))
            w.last_pto = pto

    def on_state(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """congestion_state_updated → CongestionState, if the raw state has a model name."""
        raw = d.get("new")
        state = w.states.get(str(raw))
        if state is None:
            key = str(raw)
            w.unmapped_states[key] = w.unmapped_states.get(key, 0) + 1
            return
        w.events.append(ev.CongestionState(t, state, raw=str(raw)))

    def on_timer(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """loss_timer_updated: an expired PTO timer → PtoExpired."""
        w.timer_events += 1
        if d.get("event_type") == "expired" and d.get("timer_type") == "pto":
            w.events.append(ev.PtoExpired(t))
        if d.get("event_type") == "expired":
            w.handled_from = len(w.events)  # what follows is the timer's doing

    def on_spurious(self, w: _Walk, t: float, d: dict[str, Any]) -> None:
        """spurious_loss (quic-go) → SpuriousLoss."""
        space = SPACE_OF.get(d.get("packet_number_space", "application_data"))
        if space is not None:
            w.events.append(ev.SpuriousLoss(t, int(d["packet_number"]), space))

    # ------------------------------------------------------- field accessors

    def packet(self, d: dict[str, Any], need_pn: bool = True) -> tuple[str | None, int]:
        """(space, packet number) of a packet event; space None for packets outside any space."""
        hdr = d.get("header") or {}
        ptype = hdr.get("packet_type") or d.get("packet_type") or d.get("type")
        space = SPACE_OF.get(ptype)
        pn = hdr.get("packet_number", d.get("packet_number"))
        if space is None or (pn is None and need_pn):
            return None, -1
        return space, int(pn) if pn is not None else -1

    def size(self, d: dict[str, Any]) -> int | None:
        """The packet's length in bytes, from wherever the stack put it."""
        rawinfo = d.get("raw") or {}
        hdr = d.get("header") or {}
        n = rawinfo.get("length") or hdr.get("length") or hdr.get("packet_size") or d.get("packet_size")
        return int(n) if isinstance(n, (int, float)) else None

    def trigger(self, w: _Walk, raw: Any) -> str | None:
        """The model's trigger for a logged one; unknown ones are counted and become None."""
        if raw is None:
            return None
        mapped = self.TRIGGERS.get(str(raw))
        if mapped is None:
            w.unmapped_triggers[str(raw)] = w.unmapped_triggers.get(str(raw), 0) + 1
        return mapped

    # ---------------------------------------------------------------- derived

    def _derive(self, w: _Walk) -> None:
        """Events implied by the walk: acks from ACK frames, PTOs from pto_count."""
        acked, bad = _derive_acks(w.sent, w.acks)
        w.events = _insert_at(w.events, [(w.ack_pos[i], a) for i, a in acked])
        w.skipped += bad
        if w.timer_events == 0:
            w.events += w.pto_derived

    def _summary(self, w: _Walk) -> list[str]:
        """Notes on what was derived, dropped or not mapped."""
        out = []
        if w.acks:
            out.append("packet_acked: derived from ACK frames in received packets (first acknowledgement "
                       "of each sent packet, also of packets declared lost)")
        if w.pto_derived and w.timer_events == 0:
            out.append(f"pto_expired: {len(w.pto_derived)} derived from rises of pto_count")
        if w.sentinel_ssthresh:
            out.append(f"ssthresh: {w.sentinel_ssthresh} value(s) ≥ 2^62 (u64::MAX 'infinite') omitted")
        if w.unmapped_states:
            out.append(f"congestion_state: not mapped to the model's states: {dict(w.unmapped_states)}")
        if w.unmapped_triggers:
            out.append(f"packet_lost: triggers outside qlog's set, left None: {dict(w.unmapped_triggers)}")
        if w.skipped:
            out.append(f"{w.skipped} event(s) with missing or mistyped fields skipped")
        return out + w.extra_notes
