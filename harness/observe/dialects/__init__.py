"""Per-stack qlog dialects: how each stack's qlog differs from the draft.

`get(stack)` gives the stack's `Dialect`; its `convert(raw_trace, Context)` returns a
normalised `harness.observe.events.Trace`. The mapping tables are in docs/trace.md.
A stack without a module here is read as standard qlog, with a note.
"""

from __future__ import annotations

from harness.observe.dialects._base import CAPABILITIES, Context, Dialect
from harness.observe.dialects.aioquic import AioquicDialect
from harness.observe.dialects.chromium import ChromiumDialect
from harness.observe.dialects.firefox import FirefoxDialect
from harness.observe.dialects.kwik import KwikDialect
from harness.observe.dialects.ngtcp2 import Ngtcp2Dialect
from harness.observe.dialects.picoquic import PicoquicDialect
from harness.observe.dialects.quic_go import QuicGoDialect
from harness.observe.dialects.quiche import QuicheDialect
from harness.observe.dialects.quinn import QuinnDialect
from harness.observe.dialects.s2n_quic import S2nQuicDialect
from harness.observe.dialects.tquic import TquicDialect

__all__ = ["CAPABILITIES", "Context", "Dialect", "DIALECTS", "get", "of_stack"]

DIALECTS: dict[str, Dialect] = {
    d.stack: d
    for d in (AioquicDialect(), ChromiumDialect(), FirefoxDialect(), KwikDialect(), Ngtcp2Dialect(), PicoquicDialect(), QuicGoDialect(),
              QuicheDialect(), QuinnDialect(), S2nQuicDialect(), TquicDialect())
}


class _Generic(Dialect):
    FACTS = ("no dialect module for this stack: read as standard qlog",)


class _NoQlog(Dialect):
    """A stack that writes no qlog (kernel TCP, an image without one): it logs nothing."""

    LOGS = frozenset()
    FACTS = ("this stack writes no qlog",)


def get(stack: str) -> Dialect:
    """The dialect of `stack` (a `longlook impls` name); standard qlog for unknown stacks."""
    return DIALECTS.get(stack) or _Generic()


def of_stack(stack: str, writes_qlog: bool) -> Dialect:
    """As `get`, for a stack that may write no qlog at all (caps.json's honours.qlog)."""
    return get(stack) if writes_qlog else _NoQlog()
