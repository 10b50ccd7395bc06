"""Parsing of the human-written quantities on longlook's command line.

Rates like `50mbit`, `1gbit`, `500kbit` (bits per second, decimal prefixes, as tc
writes them), times like `40ms`, `250us`, `2s`, sizes like `20MB`, `64KiB`, and loss
as a fraction (`0.01`). Every error names the flag, the value and what would be
accepted, because these come straight from users.
"""

from __future__ import annotations

import re

_RATE = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "bps": 1}
_TIME = {"s": 1_000_000, "ms": 1_000, "us": 1, "µs": 1}
_SIZE = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9,
    "kib": 2**10, "mib": 2**20, "gib": 2**30,
}
_NUM = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Zµ]*)\s*$")


class UnitError(ValueError):
    """A quantity that cannot be read; the message names flag, value and fix."""


def _split(value: str, what: str, flag: str, units: dict[str, int], example: str) -> int:
    m = _NUM.match(str(value))
    if not m or m.group(2).lower() not in units:
        raise UnitError(
            f"{flag}: cannot read {value!r} as a {what}; write it like {example} "
            f"(units: {', '.join(sorted(units))})"
        )
    number = float(m.group(1))
    result = number * units[m.group(2).lower()]
    if result != int(result):
        result = round(result)
    return int(result)


def rate_bps(value: str, flag: str = "--rate") -> int:
    """`50mbit` → 50_000_000 bits/s. A rate must be positive."""
    bps = _split(value, "rate", flag, _RATE, "50mbit, 1gbit or 500kbit")
    if bps <= 0:
        raise UnitError(f"{flag}: rate {value!r} must be positive")
    return bps


def time_us(value: str, flag: str = "--rtt") -> int:
    """`40ms` → 40_000 µs. A bare number is refused: the unit is never guessed."""
    return _split(value, "time", flag, _TIME, "40ms, 250us or 2s")


def size_bytes(value: str, flag: str = "--bytes") -> int:
    """`20MB` → 20_000_000, `64KiB` → 65_536; a bare number means bytes."""
    units = dict(_SIZE, **{"": 1})
    n = _split(value, "size", flag, units, "20MB, 64KiB or 1000000")
    if n <= 0:
        raise UnitError(f"{flag}: size {value!r} must be positive")
    return n


def fraction(value: str, flag: str = "--loss") -> float:
    """`0.01` → 0.01; must lie in [0, 1] (a percentage is refused, not guessed)."""
    try:
        p = float(value)
    except ValueError:
        raise UnitError(f"{flag}: {value!r} is not a number; give a fraction such as 0.01") from None
    if not 0.0 <= p <= 1.0:
        raise UnitError(f"{flag}: {value!r} is outside [0, 1]; give a fraction (1% is 0.01)")
    return p
