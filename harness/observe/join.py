"""The ground-truth join: every sent QUIC packet ↔ the emulator's record of its datagram.

The n-th packet entering the link from a side (in that side's capture order) is the
ground-truth record `idx` n of that direction; `join` pairs them, checks size and time,
and gives per packet number its fate, delivery time, reorder distance and extra delay.
From a join: `audit_losses` (spurious loss declarations, spurious retransmissions, real
drops never declared), `flow_shares` (per-flow goodput over time and share of the
bottleneck, QUIC and TCP), and `wire_trace` (bytes in flight and a cwnd estimate from
the wire alone, for stacks without qlog).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from harness.observe.groundtruth import GroundTruth, PacketRecord, read_log
from harness.observe import events as ev
from harness.observe.wire import WireView, no_cyclic_gc, read_wire


class JoinError(ValueError):
    """Capture and ground-truth log disagree (different runs, or a misaligned capture)."""


@dataclass(slots=True)  # not frozen: a frozen __init__ costs a third of the join
class PacketFate:
    """One sent QUIC packet and what the link did with its datagram (read-only by intent)."""

    conn: int
    direction: str  # c2s: sent by the client
    space: str
    pn: int
    size: int  # bytes of this QUIC packet (coalesced packets share a datagram)
    ack_eliciting: bool
    streams: tuple  # quic_frames.Stream frames it carried
    idx: int  # ground-truth idx of its datagram (per direction)
    fidx: int  # ... and index within its 5-tuple flow
    flow: str
    sent_us: float  # arrival at the link (= capture time on the sender's side)
    fate: str  # delivered, dropped, in_flight, or unlogged (no record: log cut short)
    reason: str | None  # drop reason
    delivered_us: float | None
    duplicated: bool  # the link also delivered an extra copy
    reorder_distance: int  # later-sent packets of the same flow delivered before this one
    extra_delay_us: float | None  # link time beyond base delay and own serialisation: queue, hold, jitter
    marks: tuple[str, ...]


@dataclass
class Join:
    """The packets one side sent, joined; `datagrams` counts its UDP datagrams."""

    direction: str
    packets: list[PacketFate]  # send order
    datagrams: int
    datagrams_by_flow: dict[str, int]
    by_pn: dict[tuple[int, str, int], PacketFate] = field(default_factory=dict)  # (conn, space, pn)

    def __post_init__(self):
        self.by_pn = {(p.conn, p.space, p.pn): p for p in self.packets}

    @property
    def dropped(self) -> list[PacketFate]:
        """Packets whose datagram the link dropped."""
        return [p for p in self.packets if p.fate == "dropped"]


@no_cyclic_gc
def join(view: WireView, gt: GroundTruth) -> Join:
    """Join the datagrams `view`'s side sent to `gt`'s records; raises JoinError when a
    size or arrival time shows that capture and log are not of the same run."""
    direction = "c2s" if view.side == "client" else "s2c"
    recs = [r for r in gt.records if r.dir == direction]
    primary = {r.idx: r for r in recs if r.fate != "duplicate"}
    dup = {r.idx for r in recs if r.fate == "duplicate"}
    _check_alignment(view, primary, direction)
    reorder = reorder_distances(gt.records, direction)
    base = _BaseDelay(gt.header, direction)
    packets, per_flow = [], defaultdict(int)
    for d in view.datagrams:  # every UDP datagram is counted, decrypted or not
        if not d.entered:
            continue
        r = primary.get(d.link_idx)
        per_flow[r.flow if r else "unlogged"] += 1
        for q in d.packets:
            if q.pn is not None:
                packets.append(_fate(d, q, r, r is not None and r.idx in dup, reorder, base, direction))
    return Join(direction, packets, sum(per_flow.values()), dict(per_flow))


def busiest_connection(view: WireView, direction: str = "s2c") -> int | None:
    """The connection that sent the most datagrams in `direction` (the transfer's),
    or None when the capture shows none."""
    counts = Counter(d.conn for d in view.datagrams if d.direction == direction and d.conn is not None)
    return counts.most_common(1)[0][0] if counts else None


def keylog_of(run_dir: Path, side: str) -> Path | None:
    """The key log that decrypts `side`'s capture: its own, or, for a stack that writes
    none (a production server), its peer's (a connection's TLS secrets are the same at
    both ends). None when neither wrote one."""
    for d in (side, "client" if side == "server" else "server"):
        keys = Path(run_dir) / d / "keys.log"
        if keys.is_file() and keys.stat().st_size:
            return keys
    return None


def run_wire(run_dir: str | Path, side: str = "server", gt: GroundTruth | None = None) -> WireView:
    """The decrypted capture of one side of a `longlook transfer --out` directory
    (pcap/SIDE.pcap, with keylog_of's key log). Raises WireError."""
    run_dir = Path(run_dir)
    gt = gt if gt is not None else read_log(run_dir / "link.ndjson")
    keys = keylog_of(run_dir, side)
    return read_wire(run_dir / "pcap" / f"{side}.pcap", [keys or run_dir / side / "keys.log"], gt.header["start_unix_ns"],
                     server_side_addrs=gt.server_side_addrs())


def join_run(run_dir: str | Path, side: str = "server", gt: GroundTruth | None = None) -> Join:
    """The join of one side of a `longlook transfer --out` directory: its capture
    (pcap/SIDE.pcap), key log (SIDE/keys.log, else the peer's: keylog_of) and ground
    truth (link.ndjson, or `gt`). Raises WireError (no capture, a key log that does not
    fit) or JoinError."""
    gt = gt if gt is not None else read_log(Path(run_dir) / "link.ndjson")
    return join(run_wire(run_dir, side, gt), gt)


def _check_alignment(view: WireView, primary: dict[int, PacketRecord], direction: str) -> None:
    """The capture writes a packet when the link reads it: same order, size and time."""
    for i, (t_ns, size) in enumerate(view.ingress):
        r = primary.get(i)
        if r is not None and (r.size != size or abs((t_ns - view.start_unix_ns) / 1000 - r.arr_us) > 1):
            raise JoinError(f"{view.path}: packet {i} entering the link ({direction}) has {size} bytes at "
                            f"{(t_ns - view.start_unix_ns) / 1000:.3f} µs in the capture but {r.size} bytes at "
                            f"{r.arr_us} µs in the ground truth: capture and log are not of the same run")


def _fate(d, q, r: PacketRecord | None, duplicated: bool, reorder: dict, base: _BaseDelay,
          direction: str) -> PacketFate:
    """One packet of datagram `d` with its record `r` (None: the log has no such idx)."""
    streams = tuple(f for f in q.frames if f.name == "stream")
    if r is None:
        return PacketFate(d.conn, direction, q.space, q.pn, q.size, q.ack_eliciting, streams, d.link_idx, -1, "",
                          d.t_us, "unlogged", None, None, False, 0, None, ())
    extra = None if r.dep_us is None else round(r.delay_us - base.at(r.arr_us, r.size), 3)
    return PacketFate(d.conn, direction, q.space, q.pn, q.size, q.ack_eliciting, streams, r.idx, r.fidx, r.flow,
                      r.arr_us, r.fate, r.reason, r.dep_us, duplicated, reorder.get(r.idx, 0), extra, r.marks)


class _BaseDelay:
    """Base one-way delay plus serialisation at the scheduled phase's rate (time-keyed
    phases only: a phase switched through the control socket is not in the log)."""

    def __init__(self, header: dict, direction: str):
        phases = header.get("schedule", {}).get("phases") or [{}]
        self.starts = [p.get("start_us", 0) for p in phases]
        self.settings = [p.get(direction, {}) for p in phases]

    def at(self, arr_us: float, size: int) -> float:
        """µs a packet of `size` bytes arriving at `arr_us` spends in an empty link."""
        s = self.settings[max(0, bisect.bisect_right(self.starts, arr_us) - 1)]
        rate = s.get("rate_bps")
        return s.get("delay_us", 0) + (size * 8e6 / rate if rate else 0.0)


def reorder_distances(records: list[PacketRecord], direction: str) -> dict[int, int]:
    """idx → how many packets of its flow with a higher fidx were delivered before it.
    Delivered records are logged in delivery order, so log order is delivery order."""
    seen: dict[str, list[int]] = defaultdict(list)  # flow → sorted fidx delivered so far
    out = {}
    for r in records:
        if r.dir == direction and r.fate == "delivered":
            flow = seen[r.flow]
            later = len(flow) - bisect.bisect_right(flow, r.fidx)
            if later:
                out[r.idx] = later
            bisect.insort(flow, r.fidx)
    return out


# --- derived facts ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpuriousDeclaration:
    """A packet the sender declared lost although the link delivered it."""

    pn: int
    space: str
    declared_us: float
    delivered_us: float
    trigger: str | None
    reorder_distance: int


@dataclass(frozen=True, slots=True)
class SpuriousRetransmission:
    """STREAM bytes sent again although an earlier copy was delivered."""

    pn: int  # the retransmitting packet
    sent_us: float
    stream_id: int
    offset: int
    length: int  # bytes of the frame already delivered by `original_pn`
    original_pn: int
    original_delivered_us: float


@dataclass
class LossAudit:
    """The sender's loss declarations checked against what the link really did."""

    declared: int
    spurious_declarations: list[SpuriousDeclaration]
    real_declarations: list[PacketFate]  # declared and really dropped
    undeclared_drops: list[PacketFate]  # ack-eliciting, dropped, never declared (ACK-only ones never are)
    spurious_retransmissions: list[SpuriousRetransmission]
    unknown_declarations: list[ev.PacketLost]  # pn not in the join (not captured)


@no_cyclic_gc
def audit_losses(j: Join, declared: Iterable[ev.PacketLost], conn: int = 0) -> LossAudit:
    """Compare declared losses (qlog or anywhere) of connection `conn` with the join."""
    declared = list(declared)
    spurious, real, unknown, named = [], [], [], set()
    for d in declared:
        p = j.by_pn.get((conn, d.space, d.pn))
        named.add((d.space, d.pn))
        if p is None:
            unknown.append(d)
        elif p.fate == "delivered":
            spurious.append(SpuriousDeclaration(p.pn, p.space, d.t_us, p.delivered_us, d.trigger, p.reorder_distance))
        elif p.fate == "dropped":
            real.append(p)
    mine = [p for p in j.packets if p.conn == conn]
    undeclared = [p for p in mine if p.fate == "dropped" and p.ack_eliciting and (p.space, p.pn) not in named]
    return LossAudit(len(declared), spurious, real, undeclared, spurious_retransmissions(mine), unknown)


def spurious_retransmissions(packets: list[PacketFate]) -> list[SpuriousRetransmission]:
    """For each STREAM frame covering bytes sent before, the earlier delivered copy."""
    sent: dict[int, list] = defaultdict(list)  # stream → [(offset, end, PacketFate)] by offset
    longest, out = 0, []
    for p in packets:
        for f in p.streams:
            end, earlier = f.offset + f.length, sent[f.stream_id]
            # Only frames starting within `longest` before this one can overlap it.
            lo = bisect.bisect_left(earlier, (f.offset - longest,))
            hi = bisect.bisect_left(earlier, (end,))
            hits = [(min(end, e) - max(f.offset, o), q) for o, e, q in earlier[lo:hi]
                    if e > f.offset and q.fate == "delivered"]
            if hits:
                n, q = max(hits, key=lambda h: h[0])
                out.append(SpuriousRetransmission(p.pn, p.sent_us, f.stream_id, f.offset, n, q.pn, q.delivered_us))
            bisect.insort(earlier, (f.offset, end, p), key=lambda x: x[:2])
            longest = max(longest, f.length)
    return out


@dataclass
class FlowShare:
    """One flow of one direction: bytes the link delivered, over time and in total."""

    flow: str
    proto: str
    direction: str
    delivered_bytes: int  # IP bytes
    share: float  # of all bytes the link delivered in this direction
    bin_us: float
    delivered: list[int]  # IP bytes delivered per bin (bin i starts at i * bin_us)
    goodput: list[int] | None = None  # QUIC flows with a join: first-time STREAM bytes delivered per bin


@no_cyclic_gc
def flow_shares(gt: GroundTruth, direction: str = "s2c", bin_us: float = 100_000,
                joins: Iterable[Join] = ()) -> list[FlowShare]:
    """Per-flow delivered bytes over time and share of the bottleneck; flows from the
    ground truth's 5-tuples (QUIC and TCP alike), goodput for flows in `joins`."""
    delivered = [r for r in gt.records if r.dir == direction and r.fate == "delivered"]
    total = sum(r.size for r in delivered) or 1
    nbins = int(max((r.dep_us for r in delivered), default=0) // bin_us) + 1
    flows: dict[str, FlowShare] = {}
    for r in delivered:
        f = flows.get(r.flow) or flows.setdefault(
            r.flow, FlowShare(r.flow, r.proto, direction, 0, 0.0, bin_us, [0] * nbins))
        f.delivered_bytes += r.size
        f.delivered[int(r.dep_us // bin_us)] += r.size
    for f in flows.values():
        f.share = f.delivered_bytes / total
    for j in joins:
        for flow, series in _goodput(j, bin_us, nbins).items():
            if flow in flows:
                flows[flow].goodput = series
    return sorted(flows.values(), key=lambda f: -f.delivered_bytes)


def _goodput(j: Join, bin_us: float, nbins: int) -> dict[str, list[int]]:
    """flow → per-bin STREAM bytes delivered for the first time."""
    covered: dict[tuple[str, int], list[list[int]]] = defaultdict(list)
    out: dict[str, list[int]] = {}
    for p in sorted((p for p in j.packets if p.fate == "delivered"), key=lambda p: p.delivered_us):
        series = out.setdefault(p.flow, [0] * nbins)
        b = min(nbins - 1, int(p.delivered_us // bin_us))
        series[b] += sum(_cover(covered[(p.flow, f.stream_id)], f.offset, f.offset + f.length) for f in p.streams)
    return out


def _cover(spans: list[list[int]], a: int, b: int) -> int:
    """Add [a, b) to disjoint sorted spans; return how many of its bytes were new."""
    i = bisect.bisect_left(spans, [a])
    if i and spans[i - 1][1] >= a:
        i -= 1
    new, lo, hi, j = b - a, a, b, i
    while j < len(spans) and spans[j][0] <= b:
        new -= max(0, min(b, spans[j][1]) - max(a, spans[j][0]))
        lo, hi = min(lo, spans[j][0]), max(hi, spans[j][1])
        j += 1
    spans[i:j] = [[lo, hi]]
    return new


# --- bytes in flight from the wire ------------------------------------------------------

WIRE_NOTE = ("source: wire (capture + key log): bytes_in_flight and congestion_window are wire-derived estimates, "
             "not the stack's. In flight: ack-eliciting bytes sent, minus those acked and those presumed lost by "
             "RFC 9002's thresholds at each ACK (the wire cannot see loss declarations). congestion_window: the "
             "largest bytes in flight within each smoothed RTT (a lower bound when app- or pacing-limited).")


@no_cyclic_gc
def wire_trace(view: WireView, conn: int = 0, sender: str = "server", stack: str = "unknown",
               losses: bool = False) -> ev.Trace:
    """PacketSent/PacketAcked and wire-derived Metrics of `sender` in connection `conn`;
    with `losses`, also a PacketLost where RFC 9002's thresholds would declare one.
    Use the sender's side capture: there sends and ACKs carry the sender's own times."""
    exponents = view.connections[conn].ack_delay_exponent if conn < len(view.connections) else {"c2s": 3, "s2c": 3}
    f = _Flight("s2c" if sender == "server" else "c2s", exponents, losses)
    for d in view.datagrams:
        if d.conn == conn:
            f.on_datagram(d)
    notes = [WIRE_NOTE]
    if view.side != sender:
        notes.append(f"capture of the {view.side} side: sends appear one link delay late, ACKs one early")
    return ev.Trace(stack, sender, f.events, view.path, notes=notes)


class _Flight:
    """RFC 9002-style accounting over what the capture shows."""

    def __init__(self, sent_dir: str, ack_exp: dict[str, int], losses: bool = False):
        self.sent_dir, self.ack_exp, self.losses = sent_dir, ack_exp, losses
        self.sent: dict[tuple[str, int], tuple[float, int, bool]] = {}  # (space, pn) → (t, size, eliciting)
        self.flying: dict[str, list[int]] = defaultdict(list)  # space → in-flight pns, sorted
        self.presumed: dict[str, list[int]] = defaultdict(list)  # space → presumed-lost pns
        self.bif, self.srtt, self.rttvar, self.min_rtt, self.latest = 0, None, None, None, None
        self.largest: dict[str, int] = {}  # space → largest acknowledged
        self.window_start, self.window_max = None, 0
        self.events: list[ev.Event] = []

    def on_datagram(self, d) -> None:
        """Account one datagram of the connection: a send, or ACKs coming back."""
        self._loss_timer(d.t_us)
        if d.direction == self.sent_dir:
            for q in d.packets:
                if q.pn is not None:
                    self._on_sent(d.t_us, q)
            self.events.append(ev.Metrics(d.t_us, bytes_in_flight=self.bif))
        else:
            for q in d.packets:
                for a in (x for x in q.frames if x.name == "ack"):
                    self._on_ack(d.t_us, q.space, a, self.ack_exp[d.direction])
        self._window(d.t_us)

    def _on_sent(self, t: float, q) -> None:
        """A sent packet: logged, and in flight when ack-eliciting."""
        self.sent[(q.space, q.pn)] = (t, q.size, q.ack_eliciting)
        self.events.append(ev.PacketSent(t, q.pn, q.space, q.size, q.ack_eliciting))
        if q.ack_eliciting:
            bisect.insort(self.flying[q.space], q.pn)
            self.bif += q.size
            self.window_max = max(self.window_max, self.bif)

    def _on_ack(self, t: float, space: str, a, exponent: int) -> None:
        """An ACK frame reaching the sender: acknowledged bytes leave the flight, RTT, losses."""
        newly = [pn for lo, hi in a.ranges for pn in _take(self.flying[space], lo, hi)]
        late = [pn for lo, hi in a.ranges for pn in _take(self.presumed[space], lo, hi)]
        for pn in newly:
            self.bif -= self.sent[(space, pn)][1]
        for pn in sorted(newly + late):
            self.events.append(ev.PacketAcked(t, pn, space))
        if a.largest in newly or a.largest in late:
            self._rtt(t - self.sent[(space, a.largest)][0], a.delay_us(exponent))
        if space == "application":  # handshake confirmed: Initial/Handshake no longer count
            for other in ("initial", "handshake"):
                self.bif -= sum(self.sent[(other, pn)][1] for pn in self.flying.pop(other, []))
        self.largest[space] = max(self.largest.get(space, a.largest), a.largest)
        self._presume_lost(t, space, self.largest[space])
        self.events.append(ev.Metrics(t, bytes_in_flight=self.bif, smoothed_rtt_us=self.srtt,
                                      min_rtt_us=self.min_rtt, latest_rtt_us=self.latest, rtt_variance_us=self.rttvar))

    def _rtt(self, sample: float, ack_delay: float) -> None:
        """RFC 9002 §5 RTT estimation (the ACK delay is trusted; max_ack_delay is not known)."""
        self.latest = sample
        self.min_rtt = sample if self.min_rtt is None else min(self.min_rtt, sample)
        adjusted = sample - ack_delay if sample - ack_delay >= self.min_rtt else sample
        if self.srtt is None:
            self.srtt, self.rttvar = adjusted, adjusted / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - adjusted)
            self.srtt = 0.875 * self.srtt + 0.125 * adjusted

    def _limit(self) -> float:
        """RFC 9002 §6.1.2's time threshold, µs (0 before the first RTT sample)."""
        return max(9 / 8 * max(self.srtt, self.latest), 1000.0) if self.srtt is not None else 0.0

    def _loss_timer(self, now: float) -> None:
        """RFC 9002 §6.1.2 (A.10): a packet below the largest acknowledged that was not
        yet lost by either threshold at its ACK is declared lost when its time threshold
        runs out, by the loss timer, with no ACK arriving then: at that instant, before
        whatever the capture shows next (a stack that logs no losses cuts its window
        then, quiche among them)."""
        limit = self._limit()
        if not limit:
            return
        for space, largest in self.largest.items():
            flying = self.flying[space]
            while flying and flying[0] < largest and self.sent[(space, flying[0])][0] + limit <= now:
                before = len(flying)
                self._presume_lost(self.sent[(space, flying[0])][0] + limit, space, largest)
                if len(flying) == before:
                    break

    def _presume_lost(self, t: float, space: str, largest: int) -> None:
        """RFC 9002 §6.1 thresholds: what a sender would declare lost at `t` (an ACK, or
        the loss timer's expiry)."""
        flying = self.flying[space]
        limit = self._limit()
        while flying and flying[0] < largest:
            pn = flying[0]
            sent_t, size, _ = self.sent[(space, pn)]
            if largest - pn < 3 and (not limit or sent_t + limit > t):
                break  # later packets were sent later still: none of them is lost either
            flying.pop(0)
            self.bif -= size
            bisect.insort(self.presumed[space], pn)
            if self.losses:
                trigger = "reordering_threshold" if largest - pn >= 3 else "time_threshold"
                self.events.append(ev.PacketLost(t, pn, space, trigger))

    def _window(self, t: float) -> None:
        """Close a window of one smoothed RTT: its largest flight is the cwnd estimate."""
        if self.window_start is None:
            self.window_start = t
        elif self.srtt and t - self.window_start >= self.srtt:
            self.events.append(ev.Metrics(t, congestion_window=self.window_max))
            self.window_start, self.window_max = t, self.bif


def _take(pns: list[int], lo: int, hi: int) -> list[int]:
    """Remove and return the packet numbers of sorted `pns` within [lo, hi]."""
    i, k = bisect.bisect_left(pns, lo), bisect.bisect_right(pns, hi)
    taken, pns[i:k] = pns[i:k], []
    return taken
