"""Impairment schedules for ``longlook-link``, as frozen dataclasses.

These mirror the JSON schedule of docs/emulator.md field for field (the Rust
side has the matching serde structs), so tests and Hypothesis strategies build
typed values instead of hand-written dicts. ``to_json()`` returns the JSON
value (dicts and lists); ``Schedule.dumps()`` the text. Omitted (None) fields
are left out of the JSON, which the emulator reads as "no impairment".

Range checks (probabilities in [0, 1], increasing phase starts, ...) belong to
``longlook-link check``, the one strict validator; here we only reject values
that cannot be expressed at all, so misuse fails where it is written.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

DIRECTIONS = ("c2s", "s2c")
ACTIONS = ("drop", "hold", "delay", "duplicate", "corrupt", "ce", "outage")
PROTOS = ("udp", "tcp")


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    """Return ``values`` without the None entries (absent in the JSON)."""
    return {key: value for key, value in values.items() if value is not None}


@dataclass(frozen=True)
class IidLoss:
    """Independent loss: each packet dropped with probability ``p`` in [0, 1]."""

    p: float

    def to_json(self) -> dict[str, Any]:
        return {"iid": self.p}


@dataclass(frozen=True)
class GilbertElliottLoss:
    """Two-state loss; state changes and losses drawn per packet, all in [0, 1]."""

    p_good_bad: float
    p_bad_good: float
    loss_good: float
    loss_bad: float

    def to_json(self) -> dict[str, Any]:
        return {"gilbert_elliott": dataclasses.asdict(self)}


Loss = IidLoss | GilbertElliottLoss


def loss_from_json(value: dict[str, Any]) -> Loss:
    """Parse the ``loss`` object of a link setting."""
    if set(value) == {"iid"}:
        return IidLoss(value["iid"])
    if set(value) == {"gilbert_elliott"}:
        return GilbertElliottLoss(**value["gilbert_elliott"])
    raise ValueError(f"loss must be {{'iid': p}} or {{'gilbert_elliott': {{...}}}}, got {value!r}")


@dataclass(frozen=True)
class LinkSettings:
    """Settings of one direction during one phase; None means "no impairment"."""

    rate_bps: int | None = None  # bits/s; None: unlimited
    trace: str | None = None  # mahimahi trace path, relative to the schedule file
    queue_bytes: int | None = None  # drop-tail limit, bytes (packet in service counts)
    queue_packets: int | None = None  # drop-tail limit, packets
    delay_us: int | None = None  # one-way base delay, µs
    jitter_us: int | None = None  # extra delay uniform in [0, jitter_us], µs
    jitter_reorders: bool | None = None  # may jitter reorder packets (default false)
    loss: Loss | None = None
    ecn_threshold_bytes: int | None = None  # queue bytes from which ECT packets get CE
    duplicate: float | None = None  # probability of one extra copy
    corrupt: float | None = None  # probability of one flipped payload bit
    blackhole: bool | None = None  # drop everything during the phase

    def to_json(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.loss is not None:
            values["loss"] = self.loss.to_json()
        return _drop_none(values)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> LinkSettings:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(value) - known
        if unknown:
            raise ValueError(f"unknown link setting(s) {sorted(unknown)}")
        args = dict(value)
        if "loss" in args:
            args["loss"] = loss_from_json(args["loss"])
        return cls(**args)


@dataclass(frozen=True)
class Phase:
    """Complete settings of both directions from ``start_us`` (µs after ready) on."""

    start_us: int = 0
    c2s: LinkSettings = field(default_factory=LinkSettings)
    s2c: LinkSettings = field(default_factory=LinkSettings)

    @classmethod
    def both(cls, settings: LinkSettings, start_us: int = 0) -> Phase:
        """Return a phase giving both directions the same settings."""
        return cls(start_us=start_us, c2s=settings, s2c=settings)

    def to_json(self) -> dict[str, Any]:
        return {"start_us": self.start_us, "c2s": self.c2s.to_json(), "s2c": self.s2c.to_json()}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Phase:
        return cls(
            start_us=value["start_us"],
            c2s=LinkSettings.from_json(value.get("c2s", {})),
            s2c=LinkSettings.from_json(value.get("s2c", {})),
        )


@dataclass(frozen=True)
class FlowSelector:
    """Packets of one direction whose protocol matches and either port is ``port``."""

    proto: str
    port: int | None = None  # None: every flow of that protocol

    def __post_init__(self) -> None:
        if self.proto not in PROTOS:
            raise ValueError(f"FlowSelector.proto must be one of {PROTOS}, got {self.proto!r}")

    def to_json(self) -> dict[str, Any]:
        return _drop_none({"proto": self.proto, "port": self.port})


@dataclass(frozen=True)
class Action:
    """An action on the ``index``-th (0-based) packet of ``dir`` (and ``flow``)."""

    dir: str
    index: int
    action: str
    flow: FlowSelector | None = None
    k: int | None = None  # hold: released after the next k packets have left
    max_hold_us: int | None = None  # hold: released at the latest after this, µs
    extra_us: int | None = None  # delay: extra delay, µs
    duration_us: int | None = None  # outage: the direction dark from this packet for this long, µs

    _REQUIRED: ClassVar[dict[str, str]] = {"hold": "k", "delay": "extra_us", "outage": "duration_us"}

    def __post_init__(self) -> None:
        if self.dir not in DIRECTIONS:
            raise ValueError(f"Action.dir must be one of {DIRECTIONS}, got {self.dir!r}")
        if self.action not in ACTIONS:
            raise ValueError(f"Action.action must be one of {ACTIONS}, got {self.action!r}")
        needed = self._REQUIRED.get(self.action)
        if needed and getattr(self, needed) is None:
            raise ValueError(f"Action {self.action!r} needs {needed}=...")

    def to_json(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.flow is not None:
            values["flow"] = self.flow.to_json()
        return _drop_none(values)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Action:
        args = dict(value)
        if "flow" in args:
            args["flow"] = FlowSelector(**args["flow"])
        return cls(**args)


@dataclass(frozen=True)
class Schedule:
    """A seed, timed phases (the first at 0 µs) and per-packet actions."""

    seed: int
    phases: tuple[Phase, ...] = (Phase(),)
    actions: tuple[Action, ...] = ()

    def __post_init__(self) -> None:
        # Accept lists for convenience but keep the value hashable and immutable.
        object.__setattr__(self, "phases", tuple(self.phases))
        object.__setattr__(self, "actions", tuple(self.actions))

    @classmethod
    def constant(cls, seed: int, settings: LinkSettings, actions=()) -> Schedule:
        """Return a one-phase schedule with ``settings`` in both directions."""
        return cls(seed=seed, phases=(Phase.both(settings),), actions=tuple(actions))

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {"seed": self.seed, "phases": [p.to_json() for p in self.phases]}
        if self.actions:
            value["actions"] = [a.to_json() for a in self.actions]
        return value

    def dumps(self) -> str:
        """Return the schedule as JSON text."""
        return json.dumps(self.to_json(), indent=2, sort_keys=True)

    def write(self, path: str | Path) -> Path:
        """Write the schedule as JSON to ``path`` and return the path."""
        path = Path(path)
        path.write_text(self.dumps() + "\n")
        return path

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Schedule:
        return cls(
            seed=value["seed"],
            phases=tuple(Phase.from_json(p) for p in value["phases"]),
            actions=tuple(Action.from_json(a) for a in value.get("actions", ())),
        )
