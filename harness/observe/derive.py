"""Events a stack's log lacks, derived from the decrypted capture and marked so.

quinn's qlog has no ACK frames, quiche's no packet_lost and aioquic's no PTO
expiry (harness/observe/probes.py finds them from the probes), so trace validation and
the properties that tie the window to acknowledgements or losses could not judge
them. The server-side capture shows every packet the sender sent and every ACK frame
that reached it; from it come the acknowledgements (exact: the ACK frames' ranges)
and the losses a sender following RFC 9002's thresholds declares at each ACK
(presumed: the capture cannot see a declaration; harness/observe/join.py's _Flight).

The capture's clock and the qlog's are aligned on the packets both saw sent (the
median offset); an event derived at the same instant as a logged one goes first,
as the ACK that arrives causes what the stack logs then (its window, its sends).
"""

from __future__ import annotations

import statistics
from dataclasses import replace

from harness.observe.events import PacketAcked, PacketLost, PacketSent, PtoExpired, Trace
from harness.observe.join import wire_trace
from harness.observe.probes import derive_ptos

#: What can be derived: capability → the event class.
DERIVABLE = {"ack_frames": PacketAcked, "packet_lost": PacketLost, "pto_expired": PtoExpired}


class DeriveError(ValueError):
    """The capture and the log share no sent packet: they cannot be aligned."""


def fill_from_wire(trace: Trace, view, lacking: set[str], conn: int = 0) -> Trace:
    """`trace` with the events of the capabilities in `lacking` (those its stack's log
    cannot carry, from its dialect's LOGS: never decided from one run's content) taken
    from the capture `view` of the same, sending side; trace.derived and its notes
    say which were derived."""
    lacking = {c for c in lacking if c in DERIVABLE} - trace.derived
    if not lacking:
        return trace
    classes = tuple(DERIVABLE[c] for c in sorted(lacking - {"pto_expired"}))
    # Presumed losses also when the log has its own: the probes' rules need them.
    wire = wire_trace(view, conn, trace.vantage, trace.stack, losses=True)
    offset, slack = _offset(trace, wire)
    found = [e for e in wire.events if isinstance(e, classes)]
    if "pto_expired" in lacking:
        peer = "c2s" if trace.vantage == "server" else "s2c"
        found += derive_ptos(wire, view.connections[conn].max_ack_delay_us[peer] if conn < len(view.connections)
                             else 25_000)
    derived = [replace(e, t_us=e.t_us - offset) for e in found]
    events = _merge(trace.events, sorted(derived, key=lambda e: e.t_us), slack)
    notes = [*trace.notes, f"derived from the capture: {', '.join(sorted(lacking))}; clock offset {offset:.0f} µs"
             + ("; losses are presumed by RFC 9002's thresholds, not the stack's declarations"
                if "packet_lost" in lacking else "")]
    return replace(trace, events=events, notes=notes, derived=trace.derived | lacking)


def _merge(logged: list, derived: list, slack: float) -> list:
    """The logged events with the derived ones in place. What the stack logs at an
    instant is its response to the ACK the capture shows then, so a derived event
    goes before the logged events of its instant; a derived loss goes after the
    logged acknowledgements of its instant, as the ACK's newly acknowledged packets
    are what reveal it (RFC 9002 §6.1: a loss is declared against the largest
    acknowledged). "The same instant" is within `slack` µs, the noise between the
    two clocks (_offset), well below a round trip: an ACK never moves before the
    send it acknowledges."""
    out, j = [], 0
    for d in derived:
        while j < len(logged) and logged[j].t_us < d.t_us - slack:
            out.append(logged[j])
            j += 1
        if isinstance(d, PacketLost):
            while j < len(logged) and isinstance(logged[j], PacketAcked) and logged[j].t_us <= d.t_us + slack:
                out.append(logged[j])
                j += 1
        out.append(d)
    return out + logged[j:]


def _offset(trace: Trace, wire: Trace) -> tuple[float, float]:
    """(offset, slack) µs: the capture's time of a send minus the log's, the median
    over the packets both saw sent; and how far that varies (twice the spread from
    the 10th percentile to the median, at least 1 µs: in virtual time both clocks
    are one, in real time a send reaches the capture some tens of µs after the log)."""
    logged = {(e.space, e.pn): e.t_us for e in trace.of(PacketSent)}
    diffs = sorted(e.t_us - logged[(e.space, e.pn)] for e in wire.of(PacketSent) if (e.space, e.pn) in logged)
    if not diffs:
        raise DeriveError(f"{trace.source}: no packet both in the log and in the capture")
    median = statistics.median(diffs)
    return median, max(1.0, 2 * (median - diffs[len(diffs) // 10]))
