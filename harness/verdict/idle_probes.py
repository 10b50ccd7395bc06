"""Probes sent with nothing to send (RFC 9002 §6.2.4), read from the data sender's
decrypted capture.

§6.2.4 gives its own example: data sent, deemed lost, retransmitted, and then the
original acknowledged; the retransmission is still in flight, so the probe timer still
runs, but nothing is left to send. "When there is no data to send, the sender SHOULD
send a PING or other ack-eliciting frame in a single packet."

The sender has nothing to send, here, when the acknowledgements that have reached it
cover every STREAM byte (and FIN) and 1-RTT CRYPTO byte it has sent, and some copy of every other frame it
has sent that is repeated until acknowledged (RFC 9000 §13.3: HANDSHAKE_DONE,
NEW_CONNECTION_ID by its sequence number, a limit or RETIRE_CONNECTION_ID by its values,
the rest by name). An ack-eliciting datagram it sends then,
carrying nothing it had not sent before and not sent upon an arrival from the peer
(within ANSWER_US: an answer to it), is a probe (or a keep-alive) when it follows the
sender's last ack-eliciting send by at least `gap_us` (a probe timeout is longer than
the round trip; a paced retransmission follows the last send closely). The datagrams
after it, each less than half `gap_us` after the one before and with no acknowledgement
with news between, are the same burst: one timer's expiry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.observe.quic_frames import Crypto, Stream
from harness.verdict.analysis import merged

#: Frames that are not data: what a sender with nothing to send may still put in a probe
#: (STREAM and CRYPTO are data accounted by their bytes; CONNECTION_CLOSE ends it all).
NOT_OWED = frozenset({"ack", "padding", "ping", "stream", "crypto", "connection_close", "immediate_ack"})


#: A send this soon after an arrival from the peer answers it (µs): RFC 9002's kGranularity.
ANSWER_US = 1_000


def _owed_key(f) -> tuple:
    """What a frame repeated until acknowledged stands for: a NEW_CONNECTION_ID its
    sequence number, a frame of varints (a limit, RETIRE_CONNECTION_ID) its values, any
    other its name."""
    if getattr(f, "name", "") == "new_connection_id":
        return (f.name, f.seq)
    return (getattr(f, "name", "?"), *getattr(f, "args", ()))


def _covers(acked: list[tuple[int, int]], sent: list[tuple[int, int]]) -> bool:
    return all(any(a <= lo and hi <= b for a, b in acked) for lo, hi in sent)


def _extents(frames) -> list[tuple[object, int, int, bool]]:
    """(key, offset, length, fin) of each frame carrying bytes: a STREAM frame by its
    stream, the 1-RTT CRYPTO stream (session tickets) as one more."""
    out = []
    for f in frames:
        if isinstance(f, Stream):
            out.append((f.stream_id, f.offset, f.length, f.fin))
        elif isinstance(f, Crypto):
            out.append(("crypto", f.offset, len(f.data), False))
    return out


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
        self.sent: dict[object, list[tuple[int, int]]] = {}  # by stream (or "crypto"): byte spans
        self.acked: dict[object, list[tuple[int, int]]] = {}
        self.fins: dict[object, bool] = {}  # stream: its FIN acknowledged
        self.by_pn: dict[int, tuple[list, set]] = {}  # unacknowledged: its extents, owed keys
        self.owed: set[tuple] = set()  # frames sent that no acknowledged packet carried yet
        self.settled: set[tuple] = set()  # frames some acknowledged packet carried
        self.ever: set[tuple] = set()  # frames sent at all

    def idle(self) -> bool:
        return not self.owed and all(self.fins.values()) and all(
            _covers(self.acked.get(s, []), spans) for s, spans in self.sent.items())

    def news_data(self, frames) -> bool:
        """Whether `frames` carry a STREAM byte (or FIN), or a frame repeated until
        acknowledged, not sent before."""
        if any(getattr(f, "name", "?") not in NOT_OWED and _owed_key(f) not in self.ever for f in frames):
            return True
        for key, offset, length, fin in _extents(frames):
            if length and not _covers(self.sent.get(key, []), [(offset, offset + length)]):
                return True
            if fin and key not in self.fins:
                return True
        return False

    def on_sent(self, pn: int, frames) -> None:
        extents = _extents(frames)
        keys = {_owed_key(f) for f in frames if getattr(f, "name", "?") not in NOT_OWED}
        self.by_pn[pn] = (extents, keys)
        for key, offset, length, fin in extents:
            if length:
                self.sent[key] = merged([*self.sent.get(key, []), (offset, offset + length)])
            if fin:
                self.fins.setdefault(key, False)
        # A copy acknowledged before settles a key for good; a first send owes it.
        self.owed |= keys - self.settled
        self.ever |= keys

    def on_acked(self, pn: int) -> None:
        extents, keys = self.by_pn.pop(pn, ([], set()))
        for key, offset, length, fin in extents:
            if length:
                self.acked[key] = merged([*self.acked.get(key, []), (offset, offset + length)])
            if fin:
                self.fins[key] = True
        self.owed -= keys
        self.settled |= keys


def idle_probe_bursts(view, conn: int, gap_us: float, sender: str = "s2c") -> list[IdleBurst]:
    """The bursts of ack-eliciting datagrams the sender (of direction `sender`) of
    connection `conn` sent with nothing to send, in time order."""
    ledger = _Ledger()
    bursts: list[IdleBurst] = []
    last_news = last_arrival = last_eliciting = float("-inf")
    largest = -1
    for d in view.datagrams:
        if d.conn != conn:
            continue
        app = [p for p in d.packets if p.space == "application" and p.pn is not None]
        if d.entered and d.direction == sender:
            frames = [f for p in app for f in p.frames]
            # Sent upon an arrival from the peer (within a timer granularity): an
            # answer to it (an acknowledgement, a loss it revealed), not a timer's.
            answer = d.t_us - last_arrival <= ANSWER_US
            eliciting = any(p.ack_eliciting for p in app)
            if eliciting and not answer and ledger.idle() and not ledger.news_data(frames):
                names = tuple(getattr(f, "name", "?") for f in frames)
                last = bursts[-1] if bursts else None
                if last and d.t_us - last.sends[-1][0] < gap_us / 2 and last_news <= last.first_us:
                    last.sends.append((d.t_us, names))
                elif d.t_us - last_eliciting >= gap_us:
                    bursts.append(IdleBurst(d.t_us, [(d.t_us, names)]))
            if eliciting:
                last_eliciting = d.t_us
            for p in app:
                ledger.on_sent(p.pn, p.frames)
        elif not d.entered and d.direction != sender:
            last_arrival = d.t_us
            for p in app:
                for f in p.frames:
                    if getattr(f, "name", "") != "ack":
                        continue
                    if f.largest > largest:
                        largest, last_news = f.largest, d.t_us
                    for pn in [pn for pn in ledger.by_pn if any(lo <= pn <= hi for lo, hi in f.ranges)]:
                        ledger.on_acked(pn)
    return bursts
