"""Facts the properties read off a normalised trace: the congestion window over time,
its reductions, when each packet was sent, what was declared lost.

Written against harness.observe.events only (never a stack's log format or the wall
clock), so the same properties run on every stack, later also in virtual time.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.observe.events import Metrics, PacketLost, PacketSent, PtoExpired, Trace

#: A drop of the window by more than this fraction counts as a reduction; smaller
#: wobbles (rounding, pacing credit) do not.
REDUCTION_FRACTION = 0.10


@dataclass(frozen=True)
class Reduction:
    """The window fell from `before` to `after` at `t_us`."""

    t_us: float
    before: int
    after: int
    bytes_in_flight: int | None
    ssthresh: int | None

    def describe(self) -> str:
        return f"cwnd {self.before} → {self.after} at t={self.t_us / 1e6:.3f} s"


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


def reductions(trace: Trace) -> list[Reduction]:
    """Every fall of the window by more than REDUCTION_FRACTION. `bytes_in_flight`
    is the smallest value reported between the last window before the fall and the
    fall itself (stacks remove lost packets from flight before or after cutting)."""
    found = []
    cwnd: int | None = None
    inflight_low: int | None = None
    ssthresh = None
    for m in trace.of(Metrics):
        if m.bytes_in_flight is not None:
            inflight_low = m.bytes_in_flight if inflight_low is None else min(inflight_low, m.bytes_in_flight)
        ssthresh = m.ssthresh if m.ssthresh is not None else ssthresh
        if m.congestion_window is None or m.congestion_window == cwnd:
            continue
        if cwnd is not None and m.congestion_window < cwnd * (1 - REDUCTION_FRACTION):
            found.append(Reduction(m.t_us, cwnd, m.congestion_window, inflight_low, ssthresh))
        cwnd = m.congestion_window
        inflight_low = m.bytes_in_flight
    return found


def send_times(trace: Trace) -> dict[tuple[str, int], float]:
    """(space, packet number) → time it was (last) sent."""
    return {(p.space, p.pn): p.t_us for p in trace.of(PacketSent)}


def losses(trace: Trace) -> list[PacketLost]:
    return trace.of(PacketLost)


def ptos(trace: Trace) -> list[PtoExpired]:
    return trace.of(PtoExpired)


def max_datagram(trace: Trace) -> int:
    """Largest application-space packet the sender sent, bytes (its datagram size)."""
    sizes = [p.size for p in trace.of(PacketSent) if p.space == "application" and p.size]
    return max(sizes) if sizes else 1200
