"""Wire formats for the wire view: pcap records and IP headers, QUIC frames, TLS
handshake messages and the key log.

`parse_frames` turns the decrypted payload of one QUIC packet into a tuple of small
frame records: what congestion-control analysis needs (ACK ranges, STREAM and CRYPTO
extents, PING, PADDING, NEW_CONNECTION_ID) in full, every other frame by name only.
Varints are read with aioquic's `Buffer`. The TLS helpers read the few handshake
fields the wire view needs to find its keys: the ClientHello random (the key log's
index), the ServerHello cipher suite and the QUIC transport parameters (for the ACK
delay exponent). `read_keylog` reads NSS key log files (SSLKEYLOGFILE format).
`long_header` and `loss_bits_variant` bend two header quirks to what aioquic expects.
`iter_pcap` streams a capture's records (scapy's RawPcapReader), `ip_header` reads
the addresses of an IPv4/IPv6 packet.
References: RFC 9000 §19 (frames), RFC 8446 §4 (handshake messages).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from aioquic.buffer import Buffer, BufferReadError
from aioquic.quic.crypto import CryptoError
from aioquic.quic.packet import QuicTransportParameters, pull_quic_header, pull_quic_transport_parameters
from scapy.utils import RawPcapReader


class FrameError(ValueError):
    """A payload could not be parsed to its end (malformed or unknown frame type)."""


@dataclass(frozen=True, slots=True)
class Ack:
    """ACK or ACK_ECN (RFC 9000 §19.3)."""

    largest: int
    #: Acknowledged packet-number ranges, inclusive (low, high), highest first.
    ranges: tuple[tuple[int, int], ...]
    #: ACK Delay field as sent (multiply by 2**ack_delay_exponent for µs).
    delay: int
    #: (ECT0, ECT1, CE) counts of an ACK_ECN frame, else None.
    ecn: tuple[int, int, int] | None = None
    name = "ack"

    def acked(self):
        """Every acknowledged packet number, highest first."""
        for low, high in self.ranges:
            yield from range(high, low - 1, -1)

    def delay_us(self, exponent: int = 3) -> int:
        """The ACK delay in µs, given the sender's ack_delay_exponent (default 3)."""
        return self.delay << exponent


@dataclass(frozen=True, slots=True)
class Stream:
    """The extent of a STREAM frame; its data is not kept."""

    stream_id: int
    offset: int
    length: int
    fin: bool
    name = "stream"


@dataclass(frozen=True, slots=True)
class Crypto:
    """A CRYPTO frame, with its data (the TLS handshake is read from it)."""

    offset: int
    data: bytes
    name = "crypto"


@dataclass(frozen=True, slots=True)
class Padding:
    """A run of PADDING bytes."""

    length: int
    name = "padding"


@dataclass(frozen=True, slots=True)
class Ping:
    """PING."""

    name = "ping"


@dataclass(frozen=True, slots=True)
class NewConnectionId:
    """NEW_CONNECTION_ID: the CID its sender will accept as DCID."""

    seq: int
    retire_prior_to: int
    cid: bytes
    name = "new_connection_id"


@dataclass(frozen=True, slots=True)
class Other:
    """Any other frame, by its RFC 9000 name (e.g. "max_data", "handshake_done"); a
    frame whose body is varints keeps them (a limit's value, a sequence number), so
    that two frames of one kind can be told apart."""

    name: str
    args: tuple[int, ...] = ()


#: Frames that do not make a packet ack-eliciting (RFC 9002 §2).
NOT_ACK_ELICITING = frozenset({"ack", "padding", "connection_close"})

# Frames whose body is a fixed number of varints (then, for some, fixed bytes).
_VARINT_FRAMES = {
    0x04: ("reset_stream", 3), 0x05: ("stop_sending", 2), 0x10: ("max_data", 1),
    0x11: ("max_stream_data", 2), 0x12: ("max_streams", 1), 0x13: ("max_streams", 1),
    0x14: ("data_blocked", 1), 0x15: ("stream_data_blocked", 2), 0x16: ("streams_blocked", 1),
    0x17: ("streams_blocked", 1), 0x19: ("retire_connection_id", 1), 0x1E: ("handshake_done", 0),
    0x1F: ("immediate_ack", 0), 0xAF: ("ack_frequency", 4),
}
_FIXED_BYTES = {0x1A: ("path_challenge", 8), 0x1B: ("path_response", 8)}


def ack_eliciting(frames) -> bool:
    """True when any frame makes the packet ack-eliciting."""
    for f in frames:
        if f.name not in NOT_ACK_ELICITING:
            return True
    return False


def parse_frames(payload: bytes) -> tuple:
    """All frames of a decrypted packet payload; raises FrameError on a malformed or
    unknown frame (the frames before it are in the error's `frames` attribute)."""
    buf = Buffer(data=payload)
    frames: list = []
    try:
        while not buf.eof():
            frames.append(_pull_frame(buf, payload))
    except (BufferReadError, ValueError) as err:
        exc = FrameError(f"frame {len(frames)} at byte {buf.tell()}: {err}")
        exc.frames = tuple(frames)
        raise exc from None
    return tuple(frames)


def _pull_frame(buf: Buffer, payload: bytes):
    """One frame starting at the buffer's position."""
    ftype = buf.pull_uint_var()
    if ftype == 0x00:
        return _pull_padding(buf, payload)
    if ftype == 0x01:
        return Ping()
    if ftype in (0x02, 0x03):
        return _pull_ack(buf, ftype == 0x03)
    if 0x08 <= ftype <= 0x0F:
        return _pull_stream(buf, ftype)
    if ftype == 0x06:
        offset = buf.pull_uint_var()
        return Crypto(offset, buf.pull_bytes(buf.pull_uint_var()))
    if ftype in _VARINT_FRAMES:
        name, count = _VARINT_FRAMES[ftype]
        return Other(name, tuple(buf.pull_uint_var() for _ in range(count)))
    if ftype in _FIXED_BYTES:
        name, size = _FIXED_BYTES[ftype]
        buf.pull_bytes(size)
        return Other(name)
    return _pull_rare(buf, ftype)


def _pull_rare(buf: Buffer, ftype: int):
    """NEW_TOKEN, NEW_CONNECTION_ID, CONNECTION_CLOSE, DATAGRAM; else unknown."""
    if ftype == 0x07:
        buf.pull_bytes(buf.pull_uint_var())
        return Other("new_token")
    if ftype == 0x18:
        seq, retire = buf.pull_uint_var(), buf.pull_uint_var()
        cid = buf.pull_bytes(buf.pull_uint8())
        buf.pull_bytes(16)  # stateless reset token
        return NewConnectionId(seq, retire, cid)
    if ftype in (0x1C, 0x1D):
        buf.pull_uint_var()  # error code
        if ftype == 0x1C:
            buf.pull_uint_var()  # offending frame type
        buf.pull_bytes(buf.pull_uint_var())
        return Other("connection_close")
    if ftype == 0x30:
        buf.seek(buf.capacity)  # a DATAGRAM without length runs to the end
        return Other("datagram")
    if ftype == 0x31:
        buf.pull_bytes(buf.pull_uint_var())
        return Other("datagram")
    # An unknown type has an unknown length: nothing after it can be read.
    raise ValueError(f"unknown frame type 0x{ftype:x}")


def _pull_padding(buf: Buffer, payload: bytes) -> Padding:
    """The PADDING run starting with the type byte just read."""
    # Runs of PADDING are common (Initial packets, PMTU probes): count them at once.
    start = buf.tell() - 1
    end = start + 1
    while end < len(payload) and payload[end] == 0:
        end += 1
    buf.seek(end)
    return Padding(end - start)


def _pull_ack(buf: Buffer, with_ecn: bool) -> Ack:
    """ACK body: gaps and range lengths turned into inclusive (low, high) ranges."""
    largest, delay = buf.pull_uint_var(), buf.pull_uint_var()
    count, first = buf.pull_uint_var(), buf.pull_uint_var()
    high, low = largest, largest - first
    ranges = [(low, high)]
    for _ in range(count):
        high = low - buf.pull_uint_var() - 2
        low = high - buf.pull_uint_var()
        ranges.append((low, high))
    if low < 0:
        raise ValueError("ACK range below packet number 0")
    ecn = (buf.pull_uint_var(), buf.pull_uint_var(), buf.pull_uint_var()) if with_ecn else None
    return Ack(largest, tuple(ranges), delay, ecn)


def _pull_stream(buf: Buffer, ftype: int) -> Stream:
    """STREAM body; the OFF, LEN and FIN bits are in the type."""
    stream_id = buf.pull_uint_var()
    offset = buf.pull_uint_var() if ftype & 0x04 else 0
    length = buf.pull_uint_var() if ftype & 0x02 else buf.capacity - buf.tell()
    buf.pull_bytes(length)  # the data itself is of no interest, only its extent
    return Stream(stream_id, offset, length, bool(ftype & 0x01))


# --- TLS handshake messages carried in CRYPTO frames ---------------------------------

CLIENT_HELLO, SERVER_HELLO, ENCRYPTED_EXTENSIONS = 1, 2, 8
_QUIC_TP_EXTENSIONS = (0x39, 0xFFA5)  # RFC 9001 codepoint, and the draft one


def contiguous(chunks: dict[int, bytes]) -> bytes:
    """The CRYPTO stream bytes from offset 0 up to the first gap ({offset: data})."""
    out = bytearray()
    for offset in sorted(chunks):
        data = chunks[offset]
        if offset > len(out):
            break
        out += data[len(out) - offset:]
    return bytes(out)


def handshake_message(stream: bytes, msg_type: int) -> bytes | None:
    """Body of the first complete TLS handshake message of `msg_type` in `stream`."""
    pos = 0
    while pos + 4 <= len(stream):
        mtype, length = stream[pos], int.from_bytes(stream[pos + 1:pos + 4], "big")
        if pos + 4 + length > len(stream):
            return None
        if mtype == msg_type:
            return stream[pos + 4:pos + 4 + length]
        pos += 4 + length
    return None


def client_random(body: bytes) -> bytes:
    """The 32-byte random of a ClientHello body (after legacy_version)."""
    if len(body) < 34:
        raise ValueError("ClientHello too short")
    return body[2:34]


def server_cipher_suite(body: bytes) -> int:
    """The cipher suite a ServerHello body selects."""
    sid_len = body[34]
    return int.from_bytes(body[35 + sid_len:37 + sid_len], "big")


def transport_parameters(body: bytes, msg_type: int) -> QuicTransportParameters | None:
    """QUIC transport parameters from a ClientHello or EncryptedExtensions body."""
    buf = Buffer(data=body)
    try:
        if msg_type == CLIENT_HELLO:
            buf.pull_bytes(34)
            buf.pull_bytes(buf.pull_uint8())  # session id
            buf.pull_bytes(buf.pull_uint16())  # cipher suites
            buf.pull_bytes(buf.pull_uint8())  # compression methods
        end = buf.pull_uint16() + buf.tell()
        while buf.tell() < end:
            ext_type, ext_len = buf.pull_uint16(), buf.pull_uint16()
            data = buf.pull_bytes(ext_len)
            if ext_type in _QUIC_TP_EXTENSIONS:
                return pull_quic_transport_parameters(Buffer(data=data))
    except (BufferReadError, ValueError):
        return None
    return None


def hello_facts(chunks: dict[int, bytes], msg_type: int) -> dict:
    """What the wire view needs from a handshake message in CRYPTO data ({offset:
    bytes}): client_random (ClientHello), cipher_suite (ServerHello),
    ack_delay_exponent and max_ack_delay_us (ClientHello, EncryptedExtensions); {}
    until it is complete."""
    body = handshake_message(contiguous(chunks), msg_type)
    facts: dict = {}
    try:
        if body is not None and msg_type == CLIENT_HELLO:
            facts["client_random"] = client_random(body)
        elif body is not None and msg_type == SERVER_HELLO:
            facts["cipher_suite"] = server_cipher_suite(body)
    except (IndexError, ValueError):
        return facts
    params = transport_parameters(body, msg_type) if body is not None and msg_type != SERVER_HELLO else None
    if params is not None and params.ack_delay_exponent is not None:
        facts["ack_delay_exponent"] = params.ack_delay_exponent
    if params is not None and params.max_ack_delay is not None:
        facts["max_ack_delay_us"] = params.max_ack_delay * 1000  # ms on the wire
    return facts


def read_keylog(*paths: str | Path) -> dict[bytes, dict[str, bytes]]:
    """NSS key log files → {client_random: {label: secret}}; comments and junk skipped."""
    out: dict[bytes, dict[str, bytes]] = {}
    for path in paths:
        for line in Path(path).read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) != 3 or line.startswith("#"):
                continue
            try:
                out.setdefault(bytes.fromhex(parts[1]), {})[parts[0]] = bytes.fromhex(parts[2])
            except ValueError:
                continue
    return out


# --- header quirks ----------------------------------------------------------------


def long_header(payload: bytes, buf: Buffer, pos: int):
    """aioquic's long-header parse at `pos`. A greased QUIC bit (RFC 9287: the fixed
    bit may be 0 when the peer allows it; quinn does so) is set in a copy first, since
    aioquic refuses such headers; the caller still decrypts the original bytes."""
    try:
        return pull_quic_header(buf)
    except ValueError:
        if payload[pos] & 0x40:
            raise
    patched = Buffer(data=payload[:pos] + bytes([payload[pos] | 0x40]) + payload[pos + 1:])
    patched.seek(pos)
    hdr = pull_quic_header(patched)
    buf.seek(patched.tell())
    return hdr


def loss_bits_variant(hp, data: bytes, enc_off: int) -> bytes | None:
    """A short-header packet as aioquic's header-protection removal must see it when
    the sender's Q and L loss bits (0x18, draft-ferrieuxhamchaoui-quic-lossbits; picoquic
    uses them) are outside header protection: the mask then covers 3 bits, not 5, so
    the two bits aioquic would unmask are pre-masked here. None when nothing changes."""
    try:
        plain, _ = hp.remove(data, enc_off)
    except CryptoError:
        return None
    flip = (plain[0] ^ data[0]) & 0x18
    return bytes([data[0] ^ flip]) + data[1:] if flip else None


# --- capture records ------------------------------------------------------------


def iter_pcap(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """(Unix ns, IP packet) per record, streamed; ns or µs pcaps both work. A file that
    ends inside a record raises EOFError after the last whole record."""
    done, size = 24, Path(path).stat().st_size
    with RawPcapReader(str(path)) as reader:
        for data, meta in reader:
            if len(data) < meta.caplen:  # scapy hands out the stub of a cut-off last record
                break
            done += 16 + len(data)
            yield meta.sec * 1_000_000_000 + meta.usec * (1 if getattr(reader, "nano", False) else 1000), data
    if done < size:
        raise EOFError(f"the file ends inside a record ({size - done} bytes after the last whole one)")


def ip_header(data: bytes) -> tuple[str, str, int, int] | None:
    """(src, dst, protocol, header length) of an IPv4/IPv6 packet, None if not one."""
    if len(data) >= 20 and data[0] >> 4 == 4:
        return socket.inet_ntoa(data[12:16]), socket.inet_ntoa(data[16:20]), data[9], (data[0] & 15) * 4
    if len(data) >= 40 and data[0] >> 4 == 6:
        v6 = socket.AF_INET6
        return socket.inet_ntop(v6, data[8:24]), socket.inet_ntop(v6, data[24:40]), data[6], 40
    return None
