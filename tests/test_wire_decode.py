"""The wire view on real captures of all five stacks (tests/fixtures/wire/, made by
make_fixture.py from `longlook transfer ... --bytes 200KB --rate 20mbit --rtt 40ms
--loss 0.02`), a key log that does not match, and a key update made in memory."""

from __future__ import annotations

import io
import ssl
import struct
from pathlib import Path

import pytest
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.tls import CipherSuite

from harness.testbed.certs import write_certs
from harness.observe.groundtruth import read_log
from harness.observe.wire import WireError, WireView, iter_pcap, read_keylog, read_wire

FIXTURES = Path(__file__).parent / "fixtures" / "wire"
STACKS = ("aioquic", "quic-go", "picoquic", "quiche", "quinn", "tquic", "s2n-quic")
OBJECT_BYTES = 200_000  # what each fixture run fetched


def load(stack: str, side: str = "server", keylog: Path | None = None) -> WireView:
    """The decrypted capture of one side of a fixture run."""
    d = FIXTURES / stack
    start = read_log(d / "link.ndjson").header["start_unix_ns"]
    return read_wire(d / "pcap" / f"{side}.pcap", [keylog or d / "keys.log"], start)


def _varint(b: bytes, i: int) -> tuple[int, int]:
    n = 1 << (b[i] >> 6)
    return int.from_bytes(bytes([b[i] & 0x3F]) + b[i + 1:i + n], "big"), i + n


def short_header_packets(pcap: Path) -> int:
    """1-RTT packets counted from the raw capture, without the wire view: walk each
    datagram's long-header packets by their Length fields; what follows (unless it is
    zero padding) is one short-header packet."""
    count = 0
    for _, ip in iter_pcap(pcap):
        if ip[9] != 17:
            continue
        b, i = ip[28:], 0
        while i < len(b) and b[i:].strip(b"\0"):
            if not b[i] & 0x80:
                count += 1
                break
            j = i + 5
            j += 1 + b[j]  # DCID
            j += 1 + b[j]  # SCID
            if (b[i] & 0x30) >> 4 == 0:  # Initial (QUIC v1): token
                n, j = _varint(b, j)
                j += n
            n, j = _varint(b, j)
            i = j + n
    return count


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("side", ["server", "client"])
def test_every_packet_is_decrypted(stack, side):
    view = load(stack, side)
    assert view.notes == [] and view.undecrypted == 0
    one_rtt = [p for d in view.datagrams for p in d.packets if p.kind == "1rtt"]
    # Not vacuous: over 50 each, except s2n-quic's client, which acknowledges each batch
    # of datagrams it reads at once (25 ACK packets for ~160 data packets here).
    floor = 20 if (stack, side) == ("s2n-quic", "client") else 50
    assert len(one_rtt) == short_header_packets(FIXTURES / stack / "pcap" / f"{side}.pcap") > floor
    assert all(p.pn is not None and p.frames and p.error is None for p in one_rtt)
    view.check()


@pytest.mark.parametrize("stack", STACKS)
def test_stream_data_covers_the_object(stack):
    """The server's STREAM frames on stream 0 cover exactly the object, with a FIN."""
    view = load(stack, "server")
    frames = [f for d in view.datagrams if d.direction == "s2c" for p in d.packets for f in p.frames
              if f.name == "stream" and f.stream_id == 0]
    end = max(f.offset + f.length for f in frames)
    assert any(f.fin and f.offset + f.length == end for f in frames)
    covered = sorted((f.offset, f.offset + f.length) for f in frames)
    reach = 0
    for a, b in covered:
        assert a <= reach, f"gap at {reach}"
        reach = max(reach, b)
    # hq-interop sends the object as is; an HTTP/3-style framing would add a few bytes.
    assert OBJECT_BYTES <= end < OBJECT_BYTES + 100


@pytest.mark.parametrize("stack", STACKS)
def test_packet_numbers_and_acks_are_plausible(stack):
    view = load(stack, "server")
    sent = [p.pn for d in view.datagrams if d.direction == "s2c" for p in d.packets if p.space == "application"]
    assert sent == sorted(sent) and len(set(sent)) == len(sent)
    acks = [f for d in view.datagrams if d.direction == "c2s" for p in d.packets if p.space == "application"
            for f in p.frames if f.name == "ack"]
    assert acks and max(a.largest for a in acks) <= max(sent)
    for a in acks:
        assert a.ranges[0][1] == a.largest
        assert all(lo <= hi for lo, hi in a.ranges)
        assert all(a.ranges[i][0] > a.ranges[i + 1][1] + 1 for i in range(len(a.ranges) - 1))


def test_ingress_counts_match_the_ground_truth():
    for stack in STACKS:
        gt = read_log(FIXTURES / stack / "link.ndjson")
        for side, direction in (("server", "s2c"), ("client", "c2s")):
            assert len(load(stack, side).ingress) == gt.summary[direction]["arrived"], (stack, side)


def test_keylog_of_another_run_is_named(tmp_path):
    view = load("aioquic", "server", keylog=FIXTURES / "quic-go" / "keys.log")
    assert view.undecrypted > 0
    note = " ".join(view.notes)
    assert "key log has no secrets for its client random" in note
    # What needs no key log is still read: the Initial packets.
    assert any(p.kind == "initial" and p.pn is not None for d in view.datagrams for p in d.packets)
    with pytest.raises(WireError, match="client random"):
        view.check()


def test_keylog_with_wrong_secrets_is_named(tmp_path):
    """Right client random, wrong secrets: nothing past the Initials decrypts."""
    lines = (FIXTURES / "quinn" / "keys.log").read_text().splitlines()
    bad = tmp_path / "keys.log"
    bad.write_text("\n".join(f"{a} {b} {'00' * (len(c) // 2)}" for a, b, c in (x.split() for x in lines)) + "\n")
    view = load("quinn", "server", keylog=bad)
    assert view.undecrypted == sum(1 for d in view.datagrams for p in d.packets if p.kind != "initial")
    assert any("does not match the capture" in n for n in view.notes)


def test_empty_keylog_reads_initials_only(tmp_path):
    empty = tmp_path / "keys.log"
    empty.write_text("# nothing\n")
    view = load("quiche", "client", keylog=empty)
    assert view.undecrypted > 0 and view.notes
    assert read_keylog(empty) == {}


# --- a key update and ChaCha20, made in memory with aioquic ----------------------------


def _ipv4_udp(src: bytes, dst: bytes, sport: int, dport: int, payload: bytes) -> bytes:
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, src, dst) + udp


def _write_pcap(path: Path, packets: list[tuple[int, bytes]]) -> None:
    """LINKTYPE_RAW, ns-resolution pcap, as the emulator writes it."""
    out = bytearray(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 101))
    for t_ns, data in packets:
        out += struct.pack("<IIII", t_ns // 10**9, t_ns % 10**9, len(data), len(data)) + data
    path.write_bytes(bytes(out))


def _in_memory_run(tmp_path: Path, suite: CipherSuite):
    """Client and server aioquic connections exchanging 60 kB with a key update in the
    middle; returns (pcap of the client side, key log)."""
    cert, key = write_certs(tmp_path / "certs")
    keylog = io.StringIO()
    ccfg = QuicConfiguration(is_client=True, alpn_protocols=["hq-interop"], secrets_log_file=keylog,
                             cipher_suites=[suite], verify_mode=ssl.CERT_NONE)
    scfg = QuicConfiguration(is_client=False, alpn_protocols=["hq-interop"], cipher_suites=[suite])
    scfg.load_cert_chain(cert, key)
    client = QuicConnection(configuration=ccfg)
    server = QuicConnection(configuration=scfg,
                            original_destination_connection_id=client.original_destination_connection_id)
    caddr, saddr = ("198.18.0.1", 40000), ("198.19.0.1", 4433)
    packets, now = [], 1.0
    client.connect(saddr, now=now)

    def exchange():
        nonlocal now
        for _ in range(50):
            moved = False
            for src, dst, conn, peer, sa, da in ((client, server, client, server, caddr, saddr),
                                                 (server, client, server, client, saddr, caddr)):
                for data, _ in conn.datagrams_to_send(now=now):
                    moved = True
                    packets.append((int(now * 1e9), _ipv4_udp(bytes(map(int, sa[0].split("."))),
                                                              bytes(map(int, da[0].split("."))), sa[1], da[1], data)))
                    peer.receive_datagram(data, sa, now=now)
                now += 0.001
            if not moved:
                return

    exchange()
    stream = client.get_next_available_stream_id()
    client.send_stream_data(stream, b"a" * 30_000)
    exchange()
    client.request_key_update()
    client.send_stream_data(stream, b"b" * 30_000, end_stream=True)
    exchange()
    pcap = tmp_path / "client.pcap"
    _write_pcap(pcap, packets)
    klog = tmp_path / "keys.log"
    klog.write_text(keylog.getvalue())
    return pcap, klog


@pytest.mark.parametrize("suite", [CipherSuite.CHACHA20_POLY1305_SHA256, CipherSuite.AES_256_GCM_SHA384])
def test_key_update_and_cipher_suites(tmp_path, suite):
    pcap, klog = _in_memory_run(tmp_path, suite)
    view = read_wire(pcap, [klog])
    view.check()
    assert view.connections[0].cipher_suite == suite
    phases = {(d.direction, p.key_phase) for d in view.datagrams for p in d.packets if p.kind == "1rtt"}
    assert ("c2s", 1) in phases and ("c2s", 0) in phases  # both generations were read
    data = sorted((f.offset, f.length) for d in view.datagrams if d.direction == "c2s" for p in d.packets
                  for f in p.frames if f.name == "stream")
    assert sum(n for _, n in data) >= 60_000


def _with_tail(pcap: Path, at: int, tail: bytes, out: Path) -> None:
    """`pcap` with `tail` written over its first datagram (the client's Initial) from
    byte `at` of the UDP payload on, where the Initial's zero padding begins."""
    packets = list(iter_pcap(pcap))
    t_ns, data = packets[0]
    ihl = (data[0] & 0x0F) * 4
    sport, dport = struct.unpack_from("!HH", data, ihl)
    payload = data[ihl + 8:]
    payload = payload[:at] + tail + payload[at + len(tail):]
    packets[0] = (t_ns, _ipv4_udp(data[12:16], data[16:20], sport, dport, payload))
    _write_pcap(out, packets)


def test_bytes_after_a_packet_that_no_receiver_could_take_are_padding(tmp_path):
    """picoquic before 1.1.53 fills a client's Initial datagram with random bytes after
    the packet. A long header of an unknown version, or with a Destination Connection ID
    longer than v1's 20 bytes, is dropped by any receiver (RFC 9000 §12.2, §17.2): the
    view ignores it and says how often; a short header there stays a problem, since it
    cannot be told from a packet that failed to read."""
    pcap, klog = _in_memory_run(tmp_path, CipherSuite.AES_128_GCM_SHA256)
    clean = read_wire(pcap, [klog])
    first = clean.datagrams[0]
    at = first.packets[0].size
    assert first.direction == "c2s" and first.packets[0].kind == "initial" and first.udp_size - at > 100
    for name, tail in (("version", b"\xb2\x72\xfa\x15\xb9\x08" + bytes(range(1, 61))),
                       ("long-cid", b"\xc3\x00\x00\x00\x01\x2a" + bytes(range(1, 61)))):
        (tmp_path / name).mkdir()
        _with_tail(pcap, at, tail, tmp_path / name / "client.pcap")
        view = read_wire(tmp_path / name / "client.pcap", [klog])
        view.check()
        assert view.junk_tails == 1 and clean.junk_tails == 0, name
        assert [len(d.packets) for d in view.datagrams] == [len(d.packets) for d in clean.datagrams], name
    # A short header, or a long one of this version, whose Destination Connection ID is
    # not the first packet's: a receiver ignores it as well (RFC 9000 §12.2).
    dcid = bytes(first_packet_dcid(pcap))
    for name, tail in (("short", b"\x41" + bytes(range(1, 60))),
                       ("other-cid", b"\xc3\x00\x00\x00\x01\x08" + bytes(range(1, 61)))):
        (tmp_path / name).mkdir()
        _with_tail(pcap, at, tail, tmp_path / name / "client.pcap")
        view = read_wire(tmp_path / name / "client.pcap", [klog])
        view.check()
        assert view.junk_tails == 1, name
    # One with the first packet's CID is read as a packet, and one that fails to
    # decrypt stays a problem: it cannot be told from a packet of the connection.
    (tmp_path / "same-cid").mkdir()
    _with_tail(pcap, at, b"\x41" + dcid + bytes(range(1, 40)), tmp_path / "same-cid" / "client.pcap")
    view = read_wire(tmp_path / "same-cid" / "client.pcap", [klog])
    assert view.junk_tails == 0
    with pytest.raises(WireError):
        view.check()


def first_packet_dcid(pcap: Path) -> bytes:
    """The Destination Connection ID of the capture's first (long-header) packet."""
    _, data = next(iter(iter_pcap(pcap)))
    udp = data[(data[0] & 0x0F) * 4 + 8:]
    return udp[6:6 + udp[5]]


def test_a_handshake_the_server_began_again_is_named(tmp_path):
    """A server that abandons a handshake and answers the client's next Initial with a
    new connection (caddy's quic-go 0.29 after its handshake timeout): the abandoned
    attempt's Handshake packets cannot be decrypted with the client's key log, which
    holds the completed one, and the note says why rather than blaming the log."""
    cert, key = write_certs(tmp_path / "certs")
    keylog = io.StringIO()
    ccfg = QuicConfiguration(is_client=True, alpn_protocols=["hq-interop"], secrets_log_file=keylog,
                             verify_mode=ssl.CERT_NONE)
    scfg = QuicConfiguration(is_client=False, alpn_protocols=["hq-interop"])
    scfg.load_cert_chain(cert, key)
    client = QuicConnection(configuration=ccfg)
    odcid = client.original_destination_connection_id
    abandoned, kept = (QuicConnection(configuration=scfg, original_destination_connection_id=odcid)
                       for _ in range(2))
    caddr, saddr = ("198.18.0.1", 40000), ("198.19.0.1", 4433)
    ip = {caddr: bytes([198, 18, 0, 1]), saddr: bytes([198, 19, 0, 1])}
    packets, now = [], 1.0

    def send(conn, src, dst, to=None):
        for data, _ in conn.datagrams_to_send(now=now):
            packets.append((int(now * 1e9), _ipv4_udp(ip[src], ip[dst], src[1], dst[1], data)))
            if to is not None:
                to.receive_datagram(data, src, now=now)

    client.connect(saddr, now=now)
    hello = [data for data, _ in client.datagrams_to_send(now=now)]
    for data in hello:
        packets.append((int(now * 1e9), _ipv4_udp(ip[caddr], ip[saddr], caddr[1], saddr[1], data)))
        abandoned.receive_datagram(data, caddr, now=now)
    send(abandoned, saddr, caddr)  # its flight never reaches the client
    now += 5.0
    for data in hello:  # the client's probe, answered by a new connection
        packets.append((int(now * 1e9), _ipv4_udp(ip[caddr], ip[saddr], caddr[1], saddr[1], data)))
        kept.receive_datagram(data, caddr, now=now)
    for _ in range(20):
        now += 0.001
        send(kept, saddr, caddr, client)
        send(client, caddr, saddr, kept)
    pcap, klog = tmp_path / "server.pcap", tmp_path / "keys.log"
    _write_pcap(pcap, packets)
    klog.write_text(keylog.getvalue())
    view = read_wire(pcap, [klog], side="server")
    assert view.undecrypted > 0  # the abandoned attempt's Handshake packets
    assert any("began the handshake again" in n for n in view.notes), view.notes
    # The completed handshake is read: the client's Finished in a Handshake packet.
    assert any(p.kind == "handshake" and p.pn is not None for d in view.datagrams if d.direction == "c2s"
               for p in d.packets)


def test_a_resend_split_elsewhere_is_no_handshake_begun_again():
    """Initial CRYPTO bytes resent at an offset already seen, shorter or longer than the
    first copy, are the same handshake; other bytes there are a new one."""
    from types import SimpleNamespace as NS

    from harness.observe.wire import Connection, _ConnKeys

    keys = _ConnKeys(Connection(0, ("198.18.0.1", 1), ("198.19.0.1", 2), b"\x01" * 8, 1), {})
    hello = bytes(range(200))

    def learn(t_us: float, data: bytes) -> None:
        frame = NS(name="crypto", offset=0, data=data)
        keys._learn(None, NS(direction="s2c", t_us=t_us), NS(kind="initial", frames=[frame]))

    learn(0, hello)
    learn(1e6, hello[:120])  # resent, split after 120 bytes
    learn(2e6, hello)
    assert keys.restarts == []
    learn(3e6, bytes(200))  # another ServerHello
    assert keys.restarts == [3.0]
