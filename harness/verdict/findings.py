"""Recorded findings: a real stack violates a property, reproducibly or on some runs.

The findings are data (spec/findings.toml), read here for the pytest plugin. The
property stays as it is; its case is marked xfail with the finding's reason, and only
a failure whose deviations all match the finding's signature (harness/verdict/
deviation.py: the kind of check and ranges on what it measured) is the expected
failure: any other failure of the case fails the run. Strict
where it reproduces on every run, so a fix upstream turns the run green loudly (an
XPASS fails the run until the entry is removed), non-strict where it is seen on some
runs only. docs/findings.md describes each, with its minimal schedule and replay line.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

#: The recorded findings, one [[finding]] table each.
FINDINGS_FILE = Path(__file__).resolve().parents[2] / "spec" / "findings.toml"


class FindingsError(ValueError):
    """spec/findings.toml cannot be read; the message names the entry and the fix."""


def load(path: Path = FINDINGS_FILE) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """(strict, non-strict) findings, each (property name, case id) → reason."""
    strict, flaky, _ = load_all(path)
    return strict, flaky


#: (property, case) → "download" or "upload": a finding of one sender role (a
#: server's deviation, seen in downloads) that its stack's other role does not carry.
#: Without an entry here a finding holds in either direction (a controller's).
DIRECTIONS: dict[tuple[str, str], str] = {}


def load_all(path: Path = FINDINGS_FILE, directions: dict[tuple[str, str], str] | None = None):
    """(strict, non-strict, signatures): the first two (property, case) → reason, the
    third (property, case) → the signature of the deviation the finding describes.
    `directions`, if given, gets the direction of each finding that names one."""
    try:
        entries = tomllib.loads(path.read_text()).get("finding", [])
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise FindingsError(f"{path}: {e}") from None
    strict: dict[tuple[str, str], str] = {}
    flaky: dict[tuple[str, str], str] = {}
    signatures: dict[tuple[str, str], dict] = {}
    for i, entry in enumerate(entries, 1):
        missing = {"property", "case", "strict", "reason", "signature"} - set(entry)
        if missing:
            raise FindingsError(f"{path}: finding #{i} lacks {', '.join(sorted(missing))}")
        key = (entry["property"], entry["case"])
        if key[0] == STACK_WIDE and entry["strict"]:
            raise FindingsError(f"{path}: finding #{i} is recorded for every property of {key[1]} "
                                f'(property = "{STACK_WIDE}"), which only a non-strict finding may be: '
                                "set strict = false, or name the property")
        if key in strict or key in flaky:
            raise FindingsError(f"{path}: finding #{i} repeats {key}: keep one entry per case")
        direction = entry.get("direction")
        if direction not in (None, "download", "upload"):
            raise FindingsError(f"{path}: finding #{i} ({key[0]}, {key[1]}): direction = {direction!r}; "
                                'give "download" or "upload" (the sender\'s role it was seen in), or leave it out')
        if direction and directions is not None:
            directions[key] = direction
        (strict if entry["strict"] else flaky)[key] = entry["reason"]
        signatures[key] = _signature(entry["signature"], f"{path}: finding #{i} ({key[0]}, {key[1]})")
    return strict, flaky, signatures


def _signature(sig, where: str):
    """Checks a signature's shape, so a typo fails at load, not as a finding that
    silently never matches. A list of signatures (one case, several findings) is
    checked one by one."""
    if isinstance(sig, list) and sig:
        return [_signature(one, where) for one in sig]
    fix = ('give e.g. signature = { kind = "beta", measured = { factor = [0.65, 0.75] } } '
           "(the kinds are the first argument of check()/deviation() in properties/)")
    if not isinstance(sig, dict) or set(sig) - {"kind", "measured"} or "kind" not in sig:
        raise FindingsError(f"{where}: signature {sig!r} is not {{kind, measured}}; {fix}")
    kinds = sig["kind"] if isinstance(sig["kind"], list) else [sig["kind"]]
    if not kinds or not all(isinstance(k, str) and k for k in kinds):
        raise FindingsError(f"{where}: signature kind {sig['kind']!r} must be a name or a list of names; {fix}")
    for name, want in sig.get("measured", {}).items():
        if isinstance(want, list) and (len(want) != 2 or not all(
                isinstance(w, (int, float)) or w in ("-inf", "inf") for w in want)):
            raise FindingsError(f"{where}: measured.{name} = {want!r}: a range is [low, high] "
                                f'(numbers, or "-inf"/"inf"); {fix}')
    return sig


#: The property name of a finding recorded for every property of a case: a stack's
#: flaky fault that any run may meet (kwik's stalled responses), matched by its
#: signature alone, beside any finding recorded for the property itself.
STACK_WIDE = "*"

#: (test function name, case id) → reason shown by pytest; → the deviation's signature.
FINDINGS, FLAKY_FINDINGS, SIGNATURES = load_all(directions=DIRECTIONS)


def case_keys(name: str, callspec_id: str | None, target) -> list[tuple[str, str]]:
    """The keys under which a case's finding may be recorded, most specific first: the
    whole parametrisation (e.g. "aioquic-cubic-4", four TCP flows), the target, and for
    a mixed pair the same two without the peer. A pair's sender carries its findings
    to any receiver: the deviation is the sender's, and a peer under which it vanishes
    is news (a strict finding then fails as an unexpected pass)."""
    ids = [callspec_id, getattr(target, "id", None)]
    if target is not None and target.id != target.sender_id:
        ids += [callspec_id.replace(target.id, target.sender_id, 1) if callspec_id else None, target.sender_id]
    release = getattr(getattr(target, "stack", None), "release_dir", None)
    if release is not None:
        # Findings are recorded on the pinned release; another release is judged
        # against them too (pytest_plugin makes them non-strict there: a release
        # without the deviation is news, not a failure).
        label, stack_name = target.stack.label, target.stack.name
        ids += [i.replace(label, stack_name, 1) for i in ids if i]
    return [(name, i) for i in dict.fromkeys(ids) if i]


def finding_for(name: str, callspec_id: str | None, target) -> tuple[bool, str, object] | None:
    """(strict, reason, signature) of the findings recorded for a case: its property's
    own (strict or not) and a stack-wide one (STACK_WIDE), merged: the property's
    strictness, both reasons, both signatures; None when there is neither."""
    direction = getattr(target, "direction", "download")
    keys = [k for k in case_keys(name, callspec_id, target) if DIRECTIONS.get(k, direction) == direction]
    own = next(((k, True) for k in keys if k in FINDINGS), None) or \
        next(((k, False) for k in keys if k in FLAKY_FINDINGS), None)
    wide = next((k for k in case_keys(STACK_WIDE, callspec_id, target) if k in FLAKY_FINDINGS), None)
    if own is None and wide is None:
        return None
    if own is None:
        return False, FLAKY_FINDINGS[wide], SIGNATURES[wide]
    key, strict = own
    reason = (FINDINGS if strict else FLAKY_FINDINGS)[key]
    if wide is None:
        return strict, reason, SIGNATURES[key]

    def flat(sig, why: str) -> list[dict]:
        # Each table keeps the reason of its finding, so the verdict names the one
        # that matched (harness.verdict.outcomes.settle); matching reads kind and
        # measured only.
        return [dict(one, _reason=why) for one in (sig if isinstance(sig, list) else [sig])]

    return strict, f"{reason}; and for every property: {FLAKY_FINDINGS[wide]}", \
        flat(SIGNATURES[key], reason) + flat(SIGNATURES[wide], FLAKY_FINDINGS[wide])
