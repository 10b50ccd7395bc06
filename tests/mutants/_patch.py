"""Patches that a mutant applies outside its controller class, and their undoing.

Some bugs live in aioquic's recovery module (the packet threshold, the pacer), not
in the controller. A mutant patches them from its controller's constructor, never
at import time: the pytest process imports a --cc module to read its family, and
must stay stock. The constructor runs inside an endpoint process started with that
--cc (real time), so a patch dies with that process, or in a pytest process whose
cases all run that --cc (virtual time); `undo_all` exists for anything that builds a
mutant controller in a process that goes on to other work (tests/test_mutants.py).
"""

from __future__ import annotations

_originals: list[tuple[object, str, object]] = []
#: The original of an attribute the owner did not have (an instance attribute made a
#: class property): undoing deletes it.
_MISSING = object()


def patch(owner: object, name: str, value: object) -> None:
    """Sets `owner.name` to `value`, remembering the original the first time only
    (every connection builds a controller; the stock value must survive them all)."""
    if not any(o is owner and n == name for o, n, _ in _originals):
        _originals.append((owner, name, getattr(owner, name, _MISSING)))
    setattr(owner, name, value)


def undo_all() -> None:
    """Restores every patched attribute, newest first."""
    while _originals:
        owner, name, value = _originals.pop()
        if value is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, value)


def active() -> list[str]:
    """`module.attribute` of each patch in force, for tests and error messages."""
    return [f"{getattr(o, '__name__', o)}.{n}" for o, n, _ in _originals]
