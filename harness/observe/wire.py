"""The wire view: the emulator's capture of one side, decrypted with the NSS key log.

`read_wire(pcap, keylogs, start_unix_ns)` streams a side's pcap (LINKTYPE_RAW, ns),
splits UDP datagrams into QUIC packets (coalesced long headers, then a short header),
removes protection with aioquic's primitives and parses the frames. Keys: Initial from
the client's first DCID; the rest from the key log entry of the ClientHello's random,
in the ServerHello's suite (else tried); key updates by "quic ku". Short-header DCID
lengths come from long headers and NEW_CONNECTION_ID. Tolerated: a greased QUIC bit
(quinn), unprotected loss bits (picoquic). What cannot be read (no secrets, another
run's key log, a truncated file, garbage) stays undecrypted and is said in
`WireView.notes`; `check()` raises it as WireError. A qlog fallback is the caller's.
"""

from __future__ import annotations

import functools
import gc
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from aioquic.buffer import Buffer, BufferReadError
from aioquic.quic.crypto import CryptoContext, CryptoError, CryptoPair, next_key_phase
from aioquic.quic.packet import QuicPacketType
from aioquic.tls import CipherSuite

from harness.observe import quic_frames as qf
from harness.observe.quic_frames import iter_pcap, read_keylog

#: Packet kinds and their packet-number space (None: not numbered).
SPACE_OF = {"initial": "initial", "handshake": "handshake", "0rtt": "application", "1rtt": "application",
            "retry": None, "version_negotiation": None}
_KIND = {QuicPacketType.INITIAL: "initial", QuicPacketType.HANDSHAKE: "handshake", QuicPacketType.ZERO_RTT: "0rtt",
         QuicPacketType.RETRY: "retry", QuicPacketType.VERSION_NEGOTIATION: "version_negotiation"}
_LABEL = {("c2s", "handshake"): "CLIENT_HANDSHAKE_TRAFFIC_SECRET", ("c2s", "1rtt"): "CLIENT_TRAFFIC_SECRET_0",
          ("s2c", "handshake"): "SERVER_HANDSHAKE_TRAFFIC_SECRET", ("s2c", "1rtt"): "SERVER_TRAFFIC_SECRET_0",
          ("c2s", "0rtt"): "CLIENT_EARLY_TRAFFIC_SECRET"}
# Suites a secret of this length can belong to (the hash output size), likeliest first.
_SUITES_BY_LEN = {32: (CipherSuite.AES_128_GCM_SHA256, CipherSuite.CHACHA20_POLY1305_SHA256),
                  48: (CipherSuite.AES_256_GCM_SHA384,)}
_OTHER = {"c2s": "s2c", "s2c": "c2s"}


class WireError(RuntimeError):
    """The capture could not be (fully) read; the message says what and why."""


@dataclass(slots=True)
class QuicPacket:
    """One QUIC packet of a datagram; pn and frames are None/() when not decrypted."""

    kind: str  # a key of SPACE_OF
    space: str | None
    size: int  # bytes of this packet inside the datagram
    pn: int | None = None
    frames: tuple = ()
    ack_eliciting: bool = False
    key_phase: int | None = None
    error: str | None = None  # why it was not (fully) read


@dataclass(slots=True)
class Datagram:
    """One UDP datagram seen on this side of the link."""

    t_ns: int  # capture time, Unix ns
    t_us: float  # µs since the link became ready
    direction: str  # "c2s" or "s2c"
    side: str  # the capture's side, "client" or "server"
    entered: bool  # True: entered the link from this side (sent); False: left toward it
    link_idx: int | None  # n-th packet entering the link from this side = ground-truth idx
    src: tuple[str, int]  # (address, port)
    dst: tuple[str, int]
    ip_size: int
    udp_size: int
    conn: int | None  # index into WireView.connections
    packets: list[QuicPacket]


@dataclass
class Connection:
    """What the wire view learnt about one QUIC connection."""

    index: int
    client: tuple[str, int]
    server: tuple[str, int]
    odcid: bytes
    version: int
    client_random: bytes | None = None
    cipher_suite: int | None = None
    ack_delay_exponent: dict[str, int] = field(default_factory=lambda: {"c2s": 3, "s2c": 3})  # by sender
    #: max_ack_delay transport parameter (µs) of the ACKs' sender, by direction (RFC 9000 §18.2: 25 ms default).
    max_ack_delay_us: dict[str, int] = field(default_factory=lambda: {"c2s": 25_000, "s2c": 25_000})
    loss_bits: bool = False  # Q/L bits seen outside header protection


@dataclass
class WireView:
    """A decrypted side capture: datagrams in capture order plus what went wrong."""

    path: str
    side: str  # "client" or "server": whose side of the link the file shows
    start_unix_ns: int
    datagrams: list[Datagram]
    connections: list[Connection]
    ingress: list[tuple[int, int]]  # (t_ns, ip_size) of every IP packet entering the link here
    notes: list[str]
    undecrypted: int = 0
    #: Datagrams whose bytes after a packet are no QUIC v1/v2 packet (random padding:
    #: picoquic before 1.1.53 fills a client's Initial datagram so), ignored as a
    #: receiver drops them; informative, not a problem of the view.
    junk_tails: int = 0

    def check(self) -> None:
        """Raise WireError when something could not be read (notes say what)."""
        if self.undecrypted or self.notes:
            raise WireError(f"{self.path}: {self.undecrypted} QUIC packets not decrypted; {'; '.join(self.notes)}")


#: QUIC versions whose long headers the view reads (RFC 9000, RFC 9369).
_VERSIONS = (0x00000001, 0x6B3343CF)


def _no_quic_packet(payload: bytes, pos: int) -> bool:
    """Whether the bytes at `pos`, after a long-header packet of the same datagram,
    cannot be a QUIC v1/v2 packet of its connection, so a receiver drops them (RFC 9000
    §12.2: coalesced packets share the first one's Destination Connection ID, and one
    with another is ignored; §17.2: v1 allows at most 20 bytes of it): a long header of
    another version, with a longer CID or with another CID, or a short header whose
    first bytes are not that CID. Random padding (picoquic before 1.1.53) is one of
    these but for a chance of 2^-8 per CID byte."""
    if pos == 0 or not payload[0] & 0x80 or len(payload) < 6 or len(payload) < pos + 6:
        return False
    first = payload[6:6 + payload[5]]
    if not payload[pos] & 0x80:
        return payload[pos + 1:pos + 1 + len(first)] != first
    version = int.from_bytes(payload[pos + 1:pos + 5], "big")
    n = payload[pos + 5]
    return version not in _VERSIONS or n > 20 or payload[pos + 6:pos + 6 + n] != first


def no_cyclic_gc(fn):
    """Run `fn` with the cyclic garbage collector paused. Views and joins are large
    acyclic object graphs (reference counting frees them); the collector's passes over
    them, triggered by the allocations themselves, cost up to a third of the time."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        was_enabled = gc.isenabled()  # nested calls leave re-enabling to the outermost
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return run


@no_cyclic_gc
def read_wire(pcap: str | Path, keylogs: list[str | Path] | dict, start_unix_ns: int | None = None,
              side: str | None = None, client_addrs=None, server_addrs=None, server_side_addrs=None) -> WireView:
    """Decrypt one side's capture. `side` defaults to the file's stem; `start_unix_ns`
    (the ground-truth header's) to the first packet's time. The server's address is
    the run's (its record names the transfer's flow); without one, it is the
    destination of the capture's first QUIC Initial, which only a client sends first.

    Directions are the link's, as the ground truth names them: s2c leaves the link's
    server side. `server_side_addrs` are that side's addresses when they are not the
    QUIC server's (an upload, whose QUIC client sits on the server side): packets are
    decrypted by their QUIC roles, then every direction is relabelled by the link."""
    keys, side = keylogs if isinstance(keylogs, dict) else read_keylog(*keylogs), side or Path(pcap).stem
    if side not in ("client", "server"):
        raise WireError(f"{pcap}: cannot tell the side from the name; pass side='client' or 'server'")
    if not server_addrs and not client_addrs:
        server_addrs = first_initial_destination(pcap)
    mirrored = bool(server_side_addrs) and set(server_side_addrs).isdisjoint(server_addrs or ())
    dec = _Decoder(keys, set(client_addrs or ()), set(server_addrs or ()), mirrored)
    view = WireView(str(pcap), side, start_unix_ns or 0, [], [], [], [])
    try:
        for t_ns, data in iter_pcap(pcap):
            view.start_unix_ns = view.start_unix_ns or t_ns
            dec.packet(view, t_ns, data)
    except Exception as err:  # scapy raises assorted errors on a broken file; keep the prefix
        view.notes.append(f"{pcap}: unreadable after {len(view.ingress)} ingress packets ({type(err).__name__}: {err})")
    view.undecrypted = sum(1 for d in view.datagrams for p in d.packets if p.pn is None and p.space)
    view.connections = [ck.conn for ck in dec.state]
    for ck in dec.state:
        ck.summarise(view)
    view.notes.extend(f"{n} {what}" for what, n in dec.problems.items())
    view.junk_tails = dec.junk_tails
    if mirrored:
        _relabel_by_link(view)
    return view


def _relabel_by_link(view: WireView) -> None:
    """Directions by the link instead of by QUIC role (read_wire's server_side_addrs):
    each datagram's, and the per-direction facts of each connection."""
    for d in view.datagrams:
        d.direction = _OTHER[d.direction]
    for c in view.connections:
        for facts in (c.ack_delay_exponent, c.max_ack_delay_us):
            facts["c2s"], facts["s2c"] = facts["s2c"], facts["c2s"]


def first_initial_destination(pcap: str | Path) -> set[str]:
    """{the destination address of the first QUIC v1/v2 Initial in `pcap`}, or an
    empty set when the capture holds none (every packet is then skipped, and said so)."""
    try:
        for _, data in iter_pcap(pcap):
            ip = qf.ip_header(data)
            if ip is None or ip[2] != 17 or len(data) < ip[3] + 8 + 5:
                continue
            first = data[ip[3] + 8]
            version = int.from_bytes(data[ip[3] + 9:ip[3] + 13], "big")
            initial_type = 1 if version == QUIC_V2 else 0
            if first & 0x80 and version in (1, QUIC_V2) and (first >> 4) & 0x3 == initial_type:
                return {ip[1]}
    except Exception:  # a broken file: read_wire reports it when it reads the packets
        pass
    return set()


#: QUIC version 2 (RFC 9369), whose Initial has long-header type 1.
QUIC_V2 = 0x6B3343CF


class _Decoder:
    """Connection tracking across one capture: who a packet belongs to."""

    def __init__(self, keys, client_addrs, server_addrs, mirrored: bool = False):
        self.keys, self.client_addrs, self.server_addrs = keys, client_addrs, server_addrs
        #: The QUIC client is on the link's server side (an upload): what enters the
        #: link from a side is what its QUIC role sends the other way.
        self.mirrored = mirrored
        self.state: list[_ConnKeys] = []  # one per connection, in order of appearance
        self.by_cid: dict[str, dict] = {"c2s": {}, "s2c": {}}  # direction → DCID (empty: (addr, port)) → conn
        self.cid_lens: dict[str, list[int]] = {"c2s": [], "s2c": []}
        self.owner: dict[tuple, _ConnKeys] = {}  # (client, client SCID) and (src, dst) → connection
        self.problems: Counter = Counter()
        self.junk_tails = 0

    def packet(self, view: WireView, t_ns: int, data: bytes) -> None:
        """Classify one IP packet, count it if it entered the link, decode it if UDP."""
        ip = qf.ip_header(data)
        if ip is not None and (ip[0] in self.client_addrs or ip[1] in self.server_addrs):
            direction = "c2s"
        elif ip is not None and (ip[0] in self.server_addrs or ip[1] in self.client_addrs):
            direction = "s2c"
        else:
            self.problems["captured packets with neither endpoint address (skipped)"] += 1
            return
        entered = ((direction == "c2s") == (view.side == "client")) != self.mirrored
        if entered:
            view.ingress.append((t_ns, len(data)))
        src, dst, proto, hlen = ip
        if proto != 17 or len(data) < hlen + 8:
            return
        sport, dport, ulen = struct.unpack_from("!HHH", data, hlen)
        payload = data[hlen + 8:hlen + max(ulen, 8)]
        d = Datagram(t_ns, (t_ns - view.start_unix_ns) / 1000, direction, view.side, entered,
                     len(view.ingress) - 1 if entered else None, (src, sport), (dst, dport), len(data),
                     len(payload), None, [])
        self._split(d, payload)
        view.datagrams.append(d)

    def _split(self, d: Datagram, payload: bytes) -> None:
        """Walk the coalesced packets of a datagram; trailing zero bytes are padding."""
        buf, pos = Buffer(data=payload), 0
        while pos < len(payload) and (pos == 0 or payload[pos:].strip(b"\0")):
            if pos > 0 and _no_quic_packet(payload, pos):
                self.junk_tails += 1
                return
            try:
                packet, pos = self._one(d, payload, buf, pos)
            except (BufferReadError, ValueError) as err:
                d.packets.append(QuicPacket("1rtt" if payload[pos] < 0x80 else "initial", None,
                                            len(payload) - pos, error=f"unparseable header: {err}"))
                self.problems["unparseable QUIC headers"] += 1
                return
            d.packets.append(packet)
            buf.seek(pos)

    def _one(self, d: Datagram, payload: bytes, buf: Buffer, pos: int) -> tuple[QuicPacket, int]:
        """Parse, attribute and decrypt the packet at `pos`; returns it and its end."""
        if payload[pos] & 0x80:
            hdr = qf.long_header(payload, buf, pos)
            end, kind, enc_off = pos + hdr.packet_length, _KIND[hdr.packet_type], buf.tell() - pos
            ck = self._long_owner(d, hdr)
        else:  # short header: DCID, then the protected packet number; runs to the end
            ck, cid_len = self._short_owner(d, payload, pos)
            end, kind, enc_off = len(payload), "1rtt", 1 + (cid_len or 0)
        packet = QuicPacket(kind, SPACE_OF[kind], end - pos)
        if ck is None:
            packet.error = "connection unknown (its handshake is not in the capture)"
            self.problems["QUIC packets of unknown connections"] += 1
        else:
            d.conn = ck.conn.index
            if packet.space is not None:
                ck.open(self, d, packet, payload[pos:end], enc_off)
        return packet, end

    def _short_owner(self, d: Datagram, payload: bytes, pos: int):
        """(connection, DCID length) of a short-header packet, by its DCID."""
        table = self.by_cid[d.direction]
        for n in self.cid_lens[d.direction]:
            ck = table.get(payload[pos + 1:pos + 1 + n] if n else d.dst)
            if ck is not None:
                return ck, n
        # A CID whose NEW_CONNECTION_ID was not captured: the connection on this path.
        ck = self.owner.get((d.src, d.dst))
        n = ck.cid_len.get(d.direction) if ck else None
        if n is not None:
            self.learn_cid(d.direction, payload[pos + 1:pos + 1 + n], d.dst, ck)
        return ck, n

    def _long_owner(self, d: Datagram, hdr):
        """The connection of a long-header packet: by DCID, else (client) by SCID, as
        the client switched to the server's CID; else a client Initial starts one."""
        ck = self.by_cid[d.direction].get(hdr.destination_cid or d.dst)
        if ck is None and d.direction == "c2s":
            ck = self.owner.get((d.src, hdr.source_cid))
            if ck is None and hdr.packet_type == QuicPacketType.INITIAL:
                ck = _ConnKeys(Connection(len(self.state), d.src, d.dst, hdr.destination_cid, hdr.version), self.keys)
                self.state.append(ck)
                self.owner[(d.src, hdr.source_cid)] = self.owner[(d.src, d.dst)] = self.owner[(d.dst, d.src)] = ck
            if ck is not None:
                self.learn_cid("c2s", hdr.destination_cid, d.dst, ck)
        if ck is not None and hdr.packet_type == QuicPacketType.RETRY:
            ck.initial_keys(hdr.source_cid)
        if ck is not None and hdr.packet_type != QuicPacketType.VERSION_NEGOTIATION:
            self.learn_cid(_OTHER[d.direction], hdr.source_cid, d.src, ck)  # the sender's SCID: peer's DCID
        return ck

    def learn_cid(self, direction: str, cid: bytes, addr: tuple[str, int], ck: _ConnKeys) -> None:
        """Packets travelling in `direction` with DCID `cid` belong to `ck`'s connection."""
        self.by_cid[direction][cid or addr] = ck
        ck.cid_len[direction] = len(cid)
        if len(cid) not in self.cid_lens[direction]:  # longest first: a CID prefixing a longer one loses
            self.cid_lens[direction] = sorted(self.cid_lens[direction] + [len(cid)], reverse=True)


class _ConnKeys:
    """Keys and decoding state of one connection: contexts per (direction, kind)."""

    def __init__(self, conn: Connection, keys: dict):
        self.conn, self.keys = conn, keys
        self.secrets: dict[str, bytes] | None = None
        self.ctx: dict[tuple[str, str], list[CryptoContext]] = {}  # current keys, then previous
        self.guesses: dict[tuple[str, str], list[CryptoContext]] = {}
        self.largest, self.crypto = {}, {}  # (dir, space) → largest pn; (dir, kind) → CRYPTO data by offset
        self.failed: Counter = Counter()  # (direction, kind) → packets not decrypted
        #: When the server sent Initial CRYPTO bytes unlike those it had sent at the same
        #: offset (s since the link's start): a new ServerHello, a handshake begun again
        #: (caddy's quic-go 0.29 after its handshake timeout) whose keys the client's
        #: key log, holding the one handshake it completed, cannot have.
        self.restarts: list[float] = []
        self.cid_len: dict[str, int] = {}  # direction → length of the DCIDs last learnt
        self.initial_keys(conn.odcid)

    def initial_keys(self, dcid: bytes) -> None:
        """(Re)derive the Initial keys from the client's Destination Connection ID."""
        pair = CryptoPair()
        pair.setup_initial(dcid, is_client=True, version=self.conn.version)
        self.ctx[("c2s", "initial")], self.ctx[("s2c", "initial")] = [pair.send], [pair.recv]

    def open(self, dec: _Decoder, d: Datagram, packet: QuicPacket, data: bytes, enc_off: int) -> None:
        """Decrypt `data` (one whole packet) into `packet` and learn from its frames."""
        got = self._decrypt(d.direction, packet.kind, data, enc_off)
        if got is None:
            self.failed[(d.direction, packet.kind)] += 1
            packet.error = "not decrypted"
            return
        header, payload, packet.pn = got
        packet.key_phase = (header[0] >> 2) & 1 if packet.kind == "1rtt" else None
        try:
            packet.frames = qf.parse_frames(payload)
        except qf.FrameError as err:
            packet.frames, packet.error = err.frames, str(err)
            dec.problems["QUIC packets with unparseable frames"] += 1
        packet.ack_eliciting = qf.ack_eliciting(packet.frames)
        self._learn(dec, d, packet)

    def _decrypt(self, direction: str, kind: str, data: bytes, enc_off: int):
        """(plain header, payload, full packet number), or None if no key fits."""
        space_key = (direction, SPACE_OF[kind])
        expected = self.largest.get(space_key, -1) + 1
        for ctx in self._contexts(direction, kind):
            for variant in self._variants(ctx, kind, data, enc_off):
                try:
                    header, payload, pn, updated = ctx.decrypt_packet(variant, enc_off, expected)
                except (CryptoError, ValueError):
                    continue
                self.conn.loss_bits |= variant is not data
                self._confirm(direction, kind, ctx, updated)
                self.largest[space_key] = max(pn, self.largest.get(space_key, -1))
                return header, payload, pn
        return None

    def _variants(self, ctx: CryptoContext, kind: str, data: bytes, enc_off: int):
        """The packet as is and (1-RTT, lazily: it costs a pass) as if its loss bits were unprotected."""
        if not self.conn.loss_bits:
            yield data
        if kind == "1rtt" and (alt := qf.loss_bits_variant(ctx.hp, data, enc_off)) is not None:
            yield alt
        if self.conn.loss_bits:
            yield data

    def _contexts(self, direction: str, kind: str) -> list[CryptoContext]:
        """Contexts to try: known keys, else one per candidate (secrets, cipher suite)."""
        key = (direction, kind)
        if key not in self.ctx and key not in self.guesses:
            self.guesses[key] = list(self._guess(_LABEL.get(key)))
        return self.ctx.get(key) or self.guesses[key]

    def _guess(self, label: str | None):
        """A context per key-log entry and cipher suite that could hold the keys."""
        random = self.conn.client_random  # None: ClientHello not captured, try every entry
        entries = [self.secrets] if self.secrets else [self.keys.get(random, {})] if random else [*self.keys.values()]
        for secrets in entries:
            secret = secrets.get(label)
            if secret is None:
                continue
            for suite in (self.conn.cipher_suite,) if self.conn.cipher_suite else _SUITES_BY_LEN.get(len(secret), ()):
                ctx = CryptoContext()
                ctx.setup(cipher_suite=suite, secret=secret, version=self.conn.version)
                ctx.candidate = secrets  # which key-log entry this guess came from
                yield ctx

    def _confirm(self, direction: str, kind: str, ctx: CryptoContext, key_update: bool) -> None:
        """Fix the guess that worked; on a key update keep the old keys for stragglers."""
        if self.secrets is None and hasattr(ctx, "candidate"):
            self.secrets = ctx.candidate
            self.guesses.clear()  # guesses of other kinds may be of other entries
        if kind != "initial":
            self.conn.cipher_suite = ctx.cipher_suite
        have = self.ctx.setdefault((direction, kind), [ctx])
        if key_update and ctx is have[0]:
            nxt = next_key_phase(ctx)
            nxt.hp = ctx.hp  # header protection keys never change (RFC 9001 §6)
            have[:] = [nxt, ctx]

    def _learn(self, dec: _Decoder, d: Datagram, packet: QuicPacket) -> None:
        """Connection IDs and handshake messages from the frames."""
        for f in packet.frames:
            if f.name == "new_connection_id":
                # A CID issued by this sender is the DCID of packets sent to it.
                dec.learn_cid(_OTHER[d.direction], f.cid, d.src, self)
            elif f.name == "crypto" and packet.kind in ("initial", "handshake"):
                seen = self.crypto.setdefault((d.direction, packet.kind), {})
                before = seen.get(f.offset, f.data)
                n = min(len(before), len(f.data))  # a resend may split the bytes elsewhere
                if (d.direction, packet.kind) == ("s2c", "initial") and before[:n] != f.data[:n]:
                    self.restarts.append(d.t_us / 1e6)
                seen[f.offset] = f.data
                self._handshake(d.direction, packet.kind)

    def _handshake(self, direction: str, kind: str) -> None:
        """Client random, cipher suite, ACK Delay exponents and max_ack_delay from the TLS messages."""
        msg_type = {("c2s", "initial"): qf.CLIENT_HELLO, ("s2c", "initial"): qf.SERVER_HELLO,
                    ("s2c", "handshake"): qf.ENCRYPTED_EXTENSIONS}.get((direction, kind))
        facts = qf.hello_facts(self.crypto[(direction, kind)], msg_type) if msg_type else {}
        for name in ("client_random", "cipher_suite"):
            if getattr(self.conn, name) is None and name in facts:
                setattr(self.conn, name, facts[name])
        exponents = self.conn.ack_delay_exponent
        exponents[direction] = facts.get("ack_delay_exponent", exponents[direction])
        delays = self.conn.max_ack_delay_us
        delays[direction] = facts.get("max_ack_delay_us", delays[direction])

    def summarise(self, view: WireView) -> None:
        """Say, in one note per connection, why packets were not decrypted."""
        if not self.failed:
            return
        c, counts = self.conn, ", ".join(f"{n} {k[1]} {k[0]}" for k, n in sorted(self.failed.items()))
        if c.client_random is not None and c.client_random not in self.keys:
            why = f"the key log has no secrets for its client random {c.client_random.hex()[:16]}… (another run's?)"
        elif self.secrets is None:
            why = "no key-log entry decrypts it: the key log does not match the capture"
        elif self.restarts:
            why = (f"the server began the handshake again (other Initial CRYPTO bytes at "
                   f"{', '.join(f't={t:.3f} s' for t in self.restarts[:3])}), so packets of the handshakes it "
                   f"abandoned have keys no key log of the completed one holds")
        else:
            why = "they failed to decrypt with the connection's keys (corrupted, or keys missing)"
        view.notes.append(f"connection {c.index} ({c.client[0]}:{c.client[1]}): {counts} packets not decrypted; {why}")
