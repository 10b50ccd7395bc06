"""What every qlog reader returns and raises: `RawTrace`, `QlogError`, `DECODE_ERRORS`.

The raw layer (harness/observe/qlog.py) has two readers, the streaming JSON-SEQ one
in qlog.py and the whole-document one in harness/observe/qlog_doc.py. Both build
these, so they live here, below both: qlog_doc.py need not import qlog.py (which
imports it), and there is no import circle. Callers keep importing them from
harness.observe.qlog.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec


class QlogError(Exception):
    """A qlog file with nothing readable in it; the message names the file."""


@dataclass
class RawTrace:
    """One trace of a qlog file, before any dialect mapping."""

    source: str
    #: "JSON", "JSON-SEQ" or "draft-00".
    format: str
    #: File-level fields (qlog_version, title, description, …).
    header: dict[str, Any]
    #: Trace-level fields (vantage_point, common_fields, configuration, …).
    meta: dict[str, Any]
    #: Events as dicts: time (file units), name "category:event", data.
    events: list[dict[str, Any]]
    partial: bool = False
    notes: list[str] = field(default_factory=list)


#: What decoding bad input may raise, from msgspec or json: the readers catch these
#: to fall back to the slower decode that says where the input broke.
DECODE_ERRORS = (msgspec.DecodeError, ValueError, RecursionError)
