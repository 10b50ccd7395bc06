"""Probes sent with nothing to send (RFC 9002 §6.2.4), read from the data sender's
decrypted capture.

§6.2.4 gives its own example: data sent, deemed lost, retransmitted, and then the
original acknowledged; the retransmission is still in flight, so the probe timer still
runs, but nothing is left to send. "When there is no data to send, the sender SHOULD
send a PING or other ack-eliciting frame in a single packet."

The sender has nothing to send, here, when the acknowledgements that have reached it
cover every STREAM byte (and FIN) it has sent, and its HANDSHAKE_DONE if it sent one:
frames that only raise a limit are not data. An ack-eliciting datagram it sends then,
carrying no STREAM byte it had not sent before, answers no new request: it is a probe
(or a keep-alive). Such datagrams sent one after another, less than `gap_us` apart and
with no acknowledgement with news between them, are one burst: one timer's expiry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.observe.quic_frames import Stream

#: Frames that are not data: what a sender with nothing to send may still put in a probe.
NOT_DATA = ("ack", "padding", "ping")


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _covers(acked: list[tuple[int, int]], sent: list[tuple[int, int]]) -> bool:
    return all(any(a <= lo and hi <= b for a, b in acked) for lo, hi in sent)


@dataclass
class IdleBurst:
    """One expiry's datagrams sent with nothing to send: their times and frame names."""

    first_us: float
    sends: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)

    @property
    def datagrams(self) -> int:
        return len(self.sends)

    def describe(self) -> str:
        return "; ".join(f"+{(t - self.first_us) / 1e3:.1f} ms {list(f)[:6]}" for t, f in self.sends)


class _Ledger:
    """What the sender has sent and what the acknowledgements that reached it cover."""

    def __init__(self) -> None:
        self.sent: dict[int, list[tuple[int, int]]] = {}
        self.acked: dict[int, list[tuple[int, int]]] = {}
        self.fins: dict[int, bool] = {}  # stream: its FIN acknowledged
        self.by_pn: dict[int, list] = {}
        self.done_pns: set[int] = set()
        self.done_acked = True  # no HANDSHAKE_DONE sent yet: nothing owed

    def idle(self) -> bool:
        return self.done_acked and all(self.fins.values()) and all(
            _covers(self.acked.get(s, []), spans) for s, spans in self.sent.items())

    def news_data(self, frames) -> bool:
        """Whether `frames` carry a STREAM byte (or FIN) not sent before."""
        for f in frames:
            if isinstance(f, Stream):
                spans = self.sent.get(f.stream_id, [])
                if f.length and not _covers(spans, [(f.offset, f.offset + f.length)]):
                    return True
                if f.fin and f.stream_id not in self.fins:
                    return True
        return False

    def on_sent(self, pn: int, frames) -> None:
        streams = [f for f in frames if isinstance(f, Stream)]
        self.by_pn[pn] = streams
        for f in streams:
            if f.length:
                self.sent[f.stream_id] = _merge([*self.sent.get(f.stream_id, []), (f.offset, f.offset + f.length)])
            if f.fin:
                self.fins.setdefault(f.stream_id, False)
        if any(getattr(f, "name", "") == "handshake_done" for f in frames):
            self.done_pns.add(pn)
            self.done_acked = False

    def on_acked(self, pn: int) -> None:
        for f in self.by_pn.pop(pn, []):
            if f.length:
                self.acked[f.stream_id] = _merge([*self.acked.get(f.stream_id, []), (f.offset, f.offset + f.length)])
            if f.fin:
                self.fins[f.stream_id] = True
        if pn in self.done_pns:
            self.done_acked = True


def idle_probe_bursts(view, conn: int, gap_us: float, sender: str = "s2c") -> list[IdleBurst]:
    """The bursts of ack-eliciting datagrams the sender (of direction `sender`) of
    connection `conn` sent with nothing to send, in time order."""
    ledger = _Ledger()
    bursts: list[IdleBurst] = []
    last_news = float("-inf")
    largest = -1
    for d in view.datagrams:
        if d.conn != conn:
            continue
        app = [p for p in d.packets if p.space == "application" and p.pn is not None]
        if d.entered and d.direction == sender:
            frames = [f for p in app for f in p.frames]
            if any(p.ack_eliciting for p in app) and ledger.idle() and not ledger.news_data(frames):
                names = tuple(getattr(f, "name", "?") for f in frames)
                last = bursts[-1] if bursts else None
                if last and d.t_us - last.sends[-1][0] < gap_us and last_news <= last.first_us:
                    last.sends.append((d.t_us, names))
                else:
                    bursts.append(IdleBurst(d.t_us, [(d.t_us, names)]))
            for p in app:
                ledger.on_sent(p.pn, p.frames)
        elif not d.entered and d.direction != sender:
            for p in app:
                for f in p.frames:
                    if getattr(f, "name", "") != "ack":
                        continue
                    if f.largest > largest:
                        largest, last_news = f.largest, d.t_us
                    for pn in [pn for pn in ledger.by_pn if any(lo <= pn <= hi for lo, hi in f.ranges)]:
                        ledger.on_acked(pn)
    return bursts
