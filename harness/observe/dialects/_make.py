"""Event constructors for the dialects' hot loops: a qlog file holds 10⁵-10⁶ events,
and building each frozen dataclass through its __init__ cost more than parsing it."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from harness.observe import events as ev


def _maker(cls: type[ev.Event]) -> Callable[[dict[str, Any]], ev.Event]:
    """A constructor from a field dict that skips the frozen dataclass __init__ (one
    object.__setattr__ per field made it 3× slower than the JSON parse of the event).
    The result compares and hashes equal to cls(**fields). Falls back to the real
    __init__ if the model ever gains slots or validation."""
    if hasattr(cls, "__slots__") or hasattr(cls, "__post_init__"):
        return lambda kw: cls(**kw)
    new = object.__new__
    fields = [f for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING]
    if all(getattr(cls, f.name, dataclasses.MISSING) is f.default for f in fields):
        # A dataclass keeps plain defaults as class attributes: an absent field reads
        # its default from there, so only the given fields need storing.
        def make(kw: dict[str, Any]) -> ev.Event:
            obj = new(cls)
            obj.__dict__.update(kw)
            return obj

        return make
    defaults = {f.name: f.default for f in fields}

    def make_with_defaults(kw: dict[str, Any]) -> ev.Event:
        obj = new(cls)
        d = obj.__dict__
        d.update(defaults)
        d.update(kw)
        return obj

    return make_with_defaults


_sent, _metrics, _acked = _maker(ev.PacketSent), _maker(ev.Metrics), _maker(ev.PacketAcked)
