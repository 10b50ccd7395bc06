"""Facts the properties read off a normalised trace: the congestion window over time,
its reductions, when each packet was sent, what was declared lost.

Written against harness.observe.events only (never a stack's log format or the wall
clock), so the same properties run on every stack, later also in virtual time.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from harness.schedule import Flow
from harness.observe.events import CongestionState, Metrics, PacketAcked, PacketLost, PacketSent, PtoExpired, Trace
from harness.observe.join import busiest_connection  # noqa: F401  (properties read it from here)
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




# -- ground truth (the emulator's record of every datagram) ---------------------


def bursts(times: list[float], gap_us: float) -> list[tuple[float, float, int]]:
    """Groups sorted times into bursts separated by more than `gap_us`:
    (first, last, count) each."""
    out: list[tuple[float, float, int]] = []
    for t in times:
        if out and t - out[-1][1] <= gap_us:
            first, _, n = out[-1]
            out[-1] = (first, t, n + 1)
        else:
            out.append((t, t, 1))
    return out


def inflight_between_window_changes(trace: Trace) -> list[tuple[float, int, int, int | None]]:
    """(t_us, cwnd before, cwnd after, peak bytes in flight reported while `before`
    was the window) at every change of the window."""
    out = []
    cwnd: int | None = None
    peak: int | None = None
    for m in trace.of(Metrics):
        if m.bytes_in_flight is not None:
            peak = m.bytes_in_flight if peak is None else max(peak, m.bytes_in_flight)
        if m.congestion_window is None or m.congestion_window == cwnd:
            continue
        if cwnd is not None:
            out.append((m.t_us, cwnd, m.congestion_window, peak))
        cwnd = m.congestion_window
        peak = m.bytes_in_flight
    return out


# -- wire view (the sender side's decrypted capture) ----------------------------


def ack_eliciting_sends(view, direction: str = "s2c") -> list[float]:
    """Times (µs) the sender put a datagram carrying an ack-eliciting packet on the
    wire."""
    return [d.t_us for d in view.datagrams
            if d.entered and d.direction == direction and any(p.ack_eliciting for p in d.packets)]


def new_ack_arrivals(view, direction: str = "c2s") -> list[float]:
    """Times (µs) datagrams reached the sender carrying an application-space ACK that
    raised the largest acknowledged packet number: acknowledgements with news."""
    largest = -1
    out = []
    for d in view.datagrams:
        if d.entered or d.direction != direction:
            continue
        for p in d.packets:
            for f in p.frames:
                if p.space == "application" and getattr(f, "name", "") == "ack" and f.largest > largest:
                    largest = f.largest
                    out.append(d.t_us)
    return out


@dataclass(frozen=True)
class AckSeen:
    """One ACK frame reaching the sender, as the sender side's capture shows it, with
    what it did to the sender's packets in the order frames arrived."""

    t_us: float  # arrival at the sender's side of the link
    space: str
    largest: int
    delay_us: int  # ACK Delay, decoded with the ACKs' sender's ack_delay_exponent
    newly: int  # packets it acknowledged for the first time
    new_largest: bool  # its largest acknowledged is one of those
    eliciting: bool  # one of those was ack-eliciting
    sample_us: float | None  # arrival minus the send of its largest acknowledged (None: never seen sent)

    @property
    def gives_sample(self) -> bool:
        """RFC 9002 §5.1: an RTT sample is taken from this frame (new largest, ack-eliciting)."""
        return self.new_largest and self.eliciting and self.sample_us is not None


def handshake_done_at(view, direction: str = "s2c") -> float:
    """When (µs) the first HANDSHAKE_DONE reached the client (frames travelling in
    `direction`), or infinity: the client's handshake confirmed."""
    return min((d.t_us for d in view.datagrams if not d.entered and d.direction == direction
                for p in d.packets for f in p.frames if getattr(f, "name", "") == "handshake_done"),
               default=float("inf"))


def acks_received(view, direction: str = "c2s") -> list[AckSeen]:
    """Every ACK frame reaching the data sender (ACKs travel in `direction`) of the
    connection that sent the most, in arrival order; a packet's duplicates are left
    out, as its receiver discards them."""
    sender = "s2c" if direction == "c2s" else "c2s"
    conn = busiest_connection(view, sender)
    if conn is None:
        return []
    exponent = view.connections[conn].ack_delay_exponent[direction]
    sent: dict[tuple[str, int], tuple[float, bool]] = {}
    acked: set[tuple[str, int]] = set()
    received: set[tuple[str, int]] = set()  # a duplicated packet is discarded unread (RFC 9000 §12.3)
    out = []
    for d in view.datagrams:
        if d.conn != conn:
            continue
        if d.direction == sender and d.entered:
            for p in d.packets:
                if p.pn is not None:
                    sent.setdefault((p.space, p.pn), (d.t_us, p.ack_eliciting))
        elif d.direction == direction and not d.entered:
            for p in d.packets:
                if (p.space, p.pn) in received:
                    continue
                received.add((p.space, p.pn))
                for f in p.frames:
                    if getattr(f, "name", "") != "ack":
                        continue
                    newly = [pn for pn in f.acked() if (p.space, pn) in sent and (p.space, pn) not in acked]
                    acked.update((p.space, pn) for pn in newly)
                    largest_sent = sent.get((p.space, f.largest))
                    out.append(AckSeen(d.t_us, p.space, f.largest, f.delay_us(exponent), len(newly),
                                       f.largest in newly, any(sent[(p.space, pn)][1] for pn in newly),
                                       d.t_us - largest_sent[0] if largest_sent else None))
    return out


def max_ack_delay_us(view, direction: str = "c2s") -> int:
    """The max_ack_delay (µs) the ACKs' sender declared in its transport parameters,
    25 ms when it declared none (RFC 9000 §18.2), of the connection that sent the most."""
    conn = busiest_connection(view, "s2c" if direction == "c2s" else "c2s") or 0
    return view.connections[conn].max_ack_delay_us[direction] if view.connections else 25_000


def handshake_confirmed_us(view, direction: str = "s2c") -> float | None:
    """When the server confirmed the handshake, as the wire shows it: its first
    HANDSHAKE_DONE (RFC 9001 §4.1.2: a server confirms on completing the handshake,
    and sends HANDSHAKE_DONE then). None when none was captured."""
    for d in view.datagrams:
        if d.direction == direction and d.entered and any(
                getattr(f, "name", "") == "handshake_done" for p in d.packets for f in p.frames):
            return d.t_us
    return None


def sender_confirmed_us(view) -> float | None:
    """When the sender's handshake was confirmed, read off its side's capture: the
    HANDSHAKE_DONE it sent (a server) or the first one it received (a client sending
    an upload), RFC 9001 §4.1.2. None when none was captured."""
    sent = handshake_confirmed_us(view, "s2c")
    received = handshake_done_at(view, "c2s")
    t = min(sent if sent is not None else float("inf"), received)
    return None if t == float("inf") else t


def bytes_newly_acknowledged(view, t_from_us: float, t_to_us: float, slack_us: float = 1_000,
                             sent_after_us: float | None = None) -> int:
    """Bytes of the sender's in-flight application packets that ACKs reaching it
    between the two times (widened by `slack_us` for the capture's clock against the
    stack's log) acknowledged for the first time: what slow start may have added to
    the window. Read off the wire's own accounting (harness.observe.join.wire_trace)
    of the connection that sent the most. With `sent_after_us`, only packets sent after
    it count: after a congestion event, packets sent before it grow no window (RFC
    9002 §7.3.2)."""
    from harness.observe.join import wire_trace

    conn = busiest_connection(view)
    if conn is None:
        return 0
    trace = wire_trace(view, conn)
    # ACK-only packets are not in flight: acknowledging them opens nothing.
    sizes = {(p.space, p.pn): p.size or 0 for p in trace.of(PacketSent)
             if p.ack_eliciting and (sent_after_us is None or p.t_us > sent_after_us)}
    return sum(sizes.get((a.space, a.pn), 0) for a in trace.of(PacketAcked)
               if a.space == "application" and t_from_us - slack_us < a.t_us <= t_to_us + slack_us)


#: The most any stack's window grows per acknowledged packet in slow start: some add a
#: full segment per packet whatever its size (quic-go its datagram size; Chromium
#: 1460 B, TCP's MSS), so the growth allowed per packet is an Ethernet MTU.
GROWTH_PER_PACKET = 1500


def initial_window_floor(view) -> tuple[int, float, int, int] | None:
    """The least initial window that explains the sender's flight on the wire, for a
    stack whose log has no window: the largest (bytes in flight − what the
    acknowledgments so far could have added) after any send, with (t_us, that flight,
    that allowance); the allowance grows fast, so it is the first round that counts. A controller's window grows by at most GROWTH_PER_PACKET per packet
    acknowledged (a loss only lowers it), so its initial window is at least this, less
    the one datagram a sender may have in flight above its window. The wire's own
    accounting (join.wire_trace) drops presumed-lost and discarded Initial/Handshake
    packets from the flight at once, which can only lower the floor. None without a
    capture of the sender's sends."""
    from harness.observe.join import wire_trace

    conn = busiest_connection(view)
    if conn is None:
        return None
    trace = wire_trace(view, conn)
    sizes = {(p.space, p.pn): p.size or 0 for p in trace.of(PacketSent) if p.ack_eliciting}
    allowance, best = 0, None
    for e in trace.events:
        if isinstance(e, PacketAcked) and (e.space, e.pn) in sizes:
            allowance += max(sizes[(e.space, e.pn)], GROWTH_PER_PACKET)
        elif isinstance(e, Metrics) and e.bytes_in_flight is not None:
            if best is None or e.bytes_in_flight - allowance > best[0]:
                best = (e.bytes_in_flight - allowance, e.t_us, e.bytes_in_flight, allowance)
    return best


def states(trace: Trace, beta: float | None) -> list[CongestionState]:
    """The sender's congestion states: as logged where the stack logs them, else
    inferred from its metrics and losses (harness.observe.states)."""
    logged = trace.of(CongestionState)
    if logged:
        return logged
    from harness.observe.states import infer_states

    return infer_states(trace, beta=beta, mss=max_datagram(trace))


def intervals_in(trace: Trace, beta: float | None, wanted: set[str]) -> list[tuple[float, float]]:
    """[start, end) µs of every stretch the sender spent in one of `wanted` states."""
    out = []
    seq = states(trace, beta)
    end_of_trace = trace.events[-1].t_us if trace.events else 0.0
    for s, nxt in zip(seq, [*seq[1:], None]):
        if s.state in wanted:
            out.append((s.t_us, nxt.t_us if nxt else end_of_trace))
    return out


def smoothed_rtt_us(trace: Trace) -> list[tuple[float, float]]:
    """(t_us, smoothed RTT µs) at every report of it."""
    return [(m.t_us, m.smoothed_rtt_us) for m in trace.of(Metrics) if m.smoothed_rtt_us]


def transfer_records(records, flow: Flow, direction: str = "s2c"):
    """The ground-truth records of `flow` (the run's record says which flow is the
    transfer) in `direction`: its protocol, and its listening end's port."""
    # The listener's port is the source of what it sends and the destination of
    # what it receives; s2c leaves the server's host, c2s the client's.
    sends = (flow.listener == "server") == (direction == "s2c")
    side = "sport" if sends else "dport"
    return [r for r in records if r.dir == direction and r.proto == flow.proto and getattr(r, side) == flow.port]


def longest_dropped_span(records, eliciting: dict[int, bool], after_us: float, before_us: float) -> float:
    """The longest time, µs, between two ack-eliciting datagrams of one run of the
    transfer's datagrams the link dropped, both entering it within (after_us,
    before_us]: what may declare persistent congestion (RFC 9002 §7.6.2: "These two
    packets MUST be ack-eliciting"). A delivered datagram ends a run; a dropped one
    without an ack-eliciting packet (eliciting[idx] False: an ACK-only datagram is not
    in flight) neither begins nor ends it, nor breaks it. A datagram the capture did
    not see counts as ack-eliciting, in the sender's favour. `records` by arr_us."""
    longest, run_from = 0.0, None
    for r in records:
        if r.arr_us > before_us:
            break
        if r.arr_us <= after_us or r.fate != "dropped":
            run_from = None
            continue
        if not eliciting.get(r.idx, True):
            continue
        run_from = r.arr_us if run_from is None else run_from
        longest = max(longest, r.arr_us - run_from)
    return longest


def transfer_share(records, flow: Flow, direction: str = "s2c", skip_us: float = 1_000_000) -> tuple[float, float, float]:
    """(the transfer's share of the bytes leaving the bottleneck, window start, window
    end) while the transfer was active, after its first `skip_us` (slow start)."""
    ours_records = [r for r in transfer_records(records, flow, direction) if r.dep_us is not None]
    if not ours_records:
        return 0.0, 0.0, 0.0
    t0, t1 = min(r.dep_us for r in ours_records) + skip_us, max(r.dep_us for r in ours_records)
    total = sum(r.size for r in records if r.dir == direction and r.dep_us is not None and t0 <= r.dep_us <= t1)
    ours = sum(r.size for r in ours_records if t0 <= r.dep_us <= t1)
    return (ours / total if total else 0.0), t0, t1


def sign_test_p(values: list[float], bound: float) -> float:
    """One-sided exact sign test: the probability of at least this many values
    above `bound` if each were above it with probability ½ (H0: median ≤ bound)."""
    import math

    n, k = len(values), sum(1 for v in values if v > bound)
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n


def after_reductions(trace: Trace) -> list[tuple[float, float]]:
    """[start, end) µs from each window reduction to the next: RFC 9002 §7.3.2 sets
    ssthresh to the reduced window, so the sender is in congestion avoidance there,
    whatever it logs. Collapses to about kMinimumWindow (persistent congestion,
    §7.6.2, after which slow start restarts) begin no interval."""
    cuts = reductions(trace)
    end_of_trace = trace.events[-1].t_us if trace.events else 0.0
    floor = 3 * max_datagram(trace)
    out = []
    for cut, nxt in zip(cuts, [*cuts[1:], None]):
        if cut.after > floor:
            out.append((cut.t_us, nxt.t_us if nxt else end_of_trace))
    return out


def merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of intervals, as sorted disjoint intervals."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def flow_bytes_while_all_active(records, skip_us: float = 1_000_000) -> tuple[dict[str, int], float, float]:
    """Bytes each flow got out of the bottleneck while every flow was active (after
    the last one's first `skip_us`): ({flow: bytes}, window start, window end)."""
    spans: dict[str, list[float]] = {}
    for r in records:
        if r.dep_us is not None:
            s = spans.setdefault(r.flow, [r.dep_us, r.dep_us])
            s[0], s[1] = min(s[0], r.dep_us), max(s[1], r.dep_us)
    if not spans:
        return {}, 0.0, 0.0
    t0 = max(a for a, _ in spans.values()) + skip_us
    t1 = min(b for _, b in spans.values())
    out = {f: 0 for f in spans}
    for r in records:
        if r.dep_us is not None and t0 <= r.dep_us <= t1:
            out[r.flow] += r.size
    return out, t0, t1


def jain(values: list[float]) -> float:
    """Jain's fairness index: 1 for an even split, 1/n when one takes everything."""
    total, squares = sum(values), sum(v * v for v in values)
    return total * total / (len(values) * squares) if squares else 0.0


def first_acks(trace, view) -> list[tuple[float, int]]:
    """(when the sender first learnt it, pn) of each application packet acknowledged,
    in time order: from its own log, or, where that has no ACK frames (quinn), from
    the ACK frames reaching it on the wire."""
    first: dict[int, float] = {}
    for a in trace.of(PacketAcked):
        if a.space == "application":
            first.setdefault(a.pn, a.t_us)
    return sorted((t, pn) for pn, t in first.items()) if first else wire_first_acks(view)


def wire_first_acks(view) -> list[tuple[float, int]]:
    """(when an ACK frame covering it first reached the sender, pn) of each application
    packet the sender put on the wire, in time order: the wire's account, whatever the
    sender logged (a packet it had declared lost is in it too)."""
    first: dict[int, float] = {}
    unacked = sorted({p.pn for d in view.datagrams if d.entered and d.direction == "s2c"
                      for p in d.packets if p.space == "application" and p.pn is not None})
    for d in view.datagrams:
        if d.entered or d.direction != "c2s":
            continue
        for f in (f for p in d.packets if p.space == "application" for f in p.frames):
            for low, high in getattr(f, "ranges", ()) if getattr(f, "name", "") == "ack" else ():
                i, k = bisect.bisect_left(unacked, low), bisect.bisect_right(unacked, high)
                first.update((pn, d.t_us) for pn in unacked[i:k])
                del unacked[i:k]
    return sorted((t, pn) for pn, t in first.items())


def log_order_slack_us(target, floor_us: float) -> float:
    """How far apart in the sender's own log an event and what it did to the sender's
    counts may stand (µs): `floor_us`, or more where the stack's threads log further
    apart (Dialect.LOG_ORDER_SLACK_US: kwik)."""
    from harness.observe import dialects

    return max(floor_us, dialects.get(target.stack.name).LOG_ORDER_SLACK_US)

