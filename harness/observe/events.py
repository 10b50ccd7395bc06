"""The normalised congestion-control event model: one vocabulary for every stack.

Every qlog dialect (and the wire view, for stacks without qlog) is turned into these
records. Names follow RFC 9002 and shared/design.md (congestion_window, ssthresh,
bytes_in_flight, pto_count, …). Units are fixed here and nowhere else:

- times: µs since the link became ready (the ground-truth log's time base), float;
- sizes and windows: bytes; rates: bits per second; RTTs: µs.

A trace is a time-ordered list of events of one connection, seen from one endpoint
(`vantage`: the data sender is what properties are about). `to_json` gives the NDJSON
line; `kind` is the discriminator. Documented in docs/trace.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

#: Packet number spaces, qlog names.
SPACES = ("initial", "handshake", "application")

#: The model's congestion states (spec/CongestionControl.tla uses the same names).
STATES = (
    "SlowStart",
    "CongestionAvoidance",
    "CongestionAvoidanceMaxed",
    "ApplicationLimited",
    "Recovery",
    "TailLossProbe",
    "RetransmissionTimeout",
)

#: Loss triggers (qlog's): declared by packet threshold, time threshold, or a PTO.
TRIGGERS = ("reordering_threshold", "time_threshold", "pto_expired")


@dataclass(frozen=True)
class Event:
    t_us: float
    kind: ClassVar[str] = "event"

    def to_json(self) -> dict[str, Any]:
        d = {"kind": self.kind}
        d.update({k: v for k, v in dataclasses.asdict(self).items() if v is not None})
        return d


@dataclass(frozen=True)
class PacketSent(Event):
    pn: int
    space: str = "application"
    #: UDP payload bytes of the packet (qlog raw.length or header.length).
    size: int | None = None
    #: Whether it carries ack-eliciting frames (in flight for CC purposes).
    ack_eliciting: bool | None = None
    kind: ClassVar[str] = "packet_sent"


@dataclass(frozen=True)
class PacketAcked(Event):
    pn: int
    space: str = "application"
    kind: ClassVar[str] = "packet_acked"


@dataclass(frozen=True)
class PacketLost(Event):
    pn: int
    space: str = "application"
    #: One of TRIGGERS, or None when the stack does not say.
    trigger: str | None = None
    kind: ClassVar[str] = "packet_lost"


@dataclass(frozen=True)
class Metrics(Event):
    """Whatever the stack reported at this instant; absent fields are None."""

    congestion_window: int | None = None
    bytes_in_flight: int | None = None
    ssthresh: int | None = None
    smoothed_rtt_us: float | None = None
    min_rtt_us: float | None = None
    latest_rtt_us: float | None = None
    rtt_variance_us: float | None = None
    pacing_rate_bps: float | None = None
    pto_count: int | None = None
    kind: ClassVar[str] = "metrics"


@dataclass(frozen=True)
class CongestionState(Event):
    state: str
    #: The stack's own name or number for it, as logged (None when inferred).
    raw: str | None = None
    #: True when derived from metrics and losses rather than logged by the stack.
    inferred: bool = False
    kind: ClassVar[str] = "congestion_state"


@dataclass(frozen=True)
class PtoExpired(Event):
    pto_count: int | None = None
    kind: ClassVar[str] = "pto_expired"


@dataclass(frozen=True)
class SpuriousLoss(Event):
    """The stack itself noticed a declared loss was spurious (quic-go logs this)."""

    pn: int
    space: str = "application"
    kind: ClassVar[str] = "spurious_loss"


KINDS: dict[str, type[Event]] = {
    c.kind: c for c in (PacketSent, PacketAcked, PacketLost, Metrics, CongestionState, PtoExpired, SpuriousLoss)
}


def from_json(d: dict[str, Any]) -> Event:
    """Inverse of Event.to_json; raises ValueError naming an unknown kind."""
    cls = KINDS.get(d.get("kind", ""))
    if cls is None:
        raise ValueError(f"unknown event kind {d.get('kind')!r}; known: {', '.join(KINDS)}")
    fields = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in fields})


@dataclass
class Trace:
    """Events of one connection from one endpoint, plus where they came from."""

    stack: str
    vantage: str  # "client" or "server"
    events: list[Event]
    source: str  # file the events were read from
    #: True when the input was truncated or broken and only a prefix was read.
    partial: bool = False
    #: Human-readable problems met while reading (units guessed, fields missing, …).
    notes: list[str] = dataclasses.field(default_factory=list)
    #: Capabilities whose events were derived from the capture, not logged
    #: (harness/observe/derive.py): "ack_frames", "packet_lost".
    derived: frozenset[str] = frozenset()

    def of(self, cls: type[Event]) -> list[Event]:
        return [e for e in self.events if isinstance(e, cls)]
