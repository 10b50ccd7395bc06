"""Facts the properties read off a normalised trace: the congestion window over time,
its reductions, when each packet was sent, what was declared lost.

Written against harness.observe.events only (never a stack's log format or the wall
clock), so the same properties run on every stack, later also in virtual time.
"""

from __future__ import annotations

from harness.observe.events import Metrics, PacketLost, PacketSent, PtoExpired, Trace
# The detection lives beside the cause attribution (harness/observe/reductions.py);
# re-exported so properties keep one import.
from harness.observe.reductions import (  # noqa: F401
    REDUCTION_FRACTION,
    Reduction,
    max_datagram,
    reductions,
)


def cwnd_series(trace: Trace) -> list[tuple[float, int, int | None, int | None]]:
    """(t_us, cwnd, bytes_in_flight, ssthresh) at every change of the window; the
    last known bytes in flight and ssthresh are carried along."""
    out: list[tuple[float, int, int | None, int | None]] = []
    inflight = ssthresh = None
    for m in trace.of(Metrics):
        inflight = m.bytes_in_flight if m.bytes_in_flight is not None else inflight
        ssthresh = m.ssthresh if m.ssthresh is not None else ssthresh
        if m.congestion_window is None:
            continue
        if not out or out[-1][1] != m.congestion_window:
            out.append((m.t_us, m.congestion_window, inflight, ssthresh))
    return out


def send_times(trace: Trace) -> dict[tuple[str, int], float]:
    """(space, packet number) → time it was (last) sent."""
    return {(p.space, p.pn): p.t_us for p in trace.of(PacketSent)}


def losses(trace: Trace) -> list[PacketLost]:
    return trace.of(PacketLost)


def ptos(trace: Trace) -> list[PtoExpired]:
    return trace.of(PtoExpired)


