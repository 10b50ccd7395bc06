"""Chromium (Debian's chromium, headless): its NetLog, read in qlog shape by
harness/observe/netlog.py.

As logged: every packet sent, with its encryption level, number, size, frames and
transmission type, at µs on CLOCK_MONOTONIC (clock "monotonic+applog"), and every
packet declared lost, at its detection time, with no trigger. ACK frames received and
RTT samples are logged to the millisecond only, so they are taken from the capture
(harness/observe/derive.py) rather than the log. No congestion window, ssthresh,
bytes in flight, smoothed RTT, congestion state or PTO expiry is logged at all: the
properties that need a logged window skip on Chromium, and those that need a window
bound use the one derived from the wire (harness/observe/window_bound.py).
"""

from __future__ import annotations

from harness.observe.dialects._base import Dialect


class ChromiumDialect(Dialect):
    """Chromium's NetLog: sends and losses only."""

    stack = "chromium"
    LOGS = frozenset({"packet_lost"})
    FACTS = (
        "chromium: read from its NetLog; no window, ssthresh, RTT, state or PTO events; ACK frames from the capture",
    )
