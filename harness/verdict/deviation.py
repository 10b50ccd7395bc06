"""A property's failed check, with what it observed: the deviation's signature.

    check(ok, "beta", f"{target.id}: cut to {beta:.2f}·cwnd", beta=beta)

A recorded finding (spec/findings.toml) names the signature of the deviation it
describes: the kind of check that failed and ranges on the measured values. Only a
failure with that signature is the finding's expected failure; any other failure of
the same case (a second, different deviation, a transfer that failed, a TypeError)
fails the run, so one finding masks nothing else.

Each kind is its own exception class. Hypothesis tells failures apart by exception
type and raise site, and every check raises here, so without a class per kind two
different deviations of one property would be merged into one and the second never
reported.
"""

from __future__ import annotations

import math
from typing import Any


class Deviation(AssertionError):
    """A property's check failed. `kind` names the check, `measured` its values."""

    kind: str = "deviation"

    def __init__(self, message: str, measured: dict[str, Any] | None = None):
        super().__init__(message)
        self.measured = dict(measured or {})

    def __str__(self) -> str:
        return f"{super().__str__()} [deviation: {self.kind}]"


_KINDS: dict[str, type[Deviation]] = {}


def kind_class(kind: str) -> type[Deviation]:
    """The exception class of one kind of deviation (one per kind, made on first use)."""
    if kind not in _KINDS:
        name = "Deviation_" + "".join(c if c.isalnum() else "_" for c in kind)
        _KINDS[kind] = type(name, (Deviation,), {"kind": kind, "__module__": __name__})
    return _KINDS[kind]


def deviation(kind: str, message: str, **measured: Any) -> Deviation:
    """The exception to raise for a failed check of `kind`."""
    return kind_class(kind)(message, measured)


def check(ok: Any, kind: str, message: str, **measured: Any) -> None:
    """Raises the deviation `kind` when `ok` is false. Build costly messages lazily by
    passing a callable."""
    if not ok:
        raise deviation(kind, message() if callable(message) else message, **measured)


def raise_all(found: list[Deviation]) -> None:
    """Raises the deviations one run showed: one alone, several as a group, so that a
    recorded finding must match every one of them to absorb the failure."""
    if len(found) == 1:
        raise found[0]
    if found:
        raise ExceptionGroup(f"{len(found)} deviations: {', '.join(d.kind for d in found)}", found)


def matches(exc: BaseException, signature: dict) -> bool:
    """Whether `exc` is the deviation a finding's signature describes.

    signature: {"kind": "...", "measured": {name: [low, high] | value, ...}}; a range
    bounds a number (inclusive, either end may be omitted with "-inf"/"inf"), any other
    value must be equal. A kind may also be a list: any of them; and a signature may
    be a list of such tables (a case with two findings): any of them.
    """
    if isinstance(signature, list):  # a case with several findings: any of them
        return any(matches(exc, one) for one in signature)
    if not isinstance(exc, Deviation):
        return False
    kinds = signature.get("kind")
    if exc.kind not in (kinds if isinstance(kinds, list) else [kinds]):
        return False
    for name, want in signature.get("measured", {}).items():
        if name not in exc.measured:
            return False
        got = exc.measured[name]
        if isinstance(want, list):
            low, high = (_number(w) for w in want)
            if not isinstance(got, (int, float)) or not low <= got <= high:
                return False
        elif got != want:
            return False
    return True


def _number(value: Any) -> float:
    return float(value) if value not in ("-inf", "inf") else (math.inf if value == "inf" else -math.inf)
