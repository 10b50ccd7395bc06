"""Broken input to the wire view: truncated captures, garbage bytes, mangled datagrams
and frame payloads. Nothing may raise except the documented errors; what was readable
before the damage is still returned."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.observe import quic_frames as qf
from harness.observe.wire import read_wire
from test_wire_decode import FIXTURES, STACKS, load


def _fixture_bytes(stack: str) -> bytes:
    return (FIXTURES / stack / "pcap" / "server.pcap").read_bytes()


@pytest.mark.parametrize("stack", STACKS)
def test_random_truncations(tmp_path, stack):
    whole = load(stack)
    data = _fixture_bytes(stack)
    rng = random.Random(stack)
    boundaries = {pos for pos, _, _ in _records(data)} | {len(data)}
    for cut in [0, 1, 23, 24, 25, 39, 40] + rng.sample(range(41, len(data)), 25):
        path = tmp_path / "server.pcap"
        path.write_bytes(data[:cut])
        view = read_wire(path, [FIXTURES / stack / "keys.log"])
        if cut > 24 and cut not in boundaries:  # cut inside a record: said, and the stub is not used
            assert any("ends inside a record" in n or "unreadable" in n for n in view.notes), cut
            assert view.undecrypted == 0
        # A prefix of the records is read exactly as in the whole file.
        n = len(view.datagrams)
        assert n <= len(whole.datagrams)
        for got, want in zip(view.datagrams[:-1], whole.datagrams[:n - 1]):
            assert [(p.kind, p.pn) for p in got.packets] == [(p.kind, p.pn) for p in want.packets]


def test_garbage_files(tmp_path):
    rng = random.Random(7)
    path = tmp_path / "client.pcap"
    cases = [b"", b"\x00" * 100, rng.randbytes(5000), _fixture_bytes("aioquic")[:24] + rng.randbytes(5000)]
    for blob in cases:
        path.write_bytes(blob)
        view = read_wire(path, [FIXTURES / "aioquic" / "keys.log"])
        assert view.datagrams == [] or view.notes


def _records(data: bytes):
    """(offset of record, header, body) of a big- or little-endian pcap."""
    endian = ">" if data[:4] in (b"\xa1\xb2\x3c\x4d", b"\xa1\xb2\xc3\xd4") else "<"
    pos = 24
    while pos + 16 <= len(data):
        incl = struct.unpack_from(endian + "I", data, pos + 8)[0]
        yield pos, data[pos:pos + 16], data[pos + 16:pos + 16 + incl]
        pos += 16 + incl


@pytest.mark.parametrize("stack", ["quinn", "picoquic", "quiche"])
def test_mangled_datagrams(tmp_path, stack):
    """Flipped bytes, cut UDP payloads and random payloads inside a valid pcap."""
    data = bytearray(_fixture_bytes(stack))
    rng = random.Random(stack)
    records = list(_records(bytes(data)))
    for pos, header, body in rng.sample(records, 40):
        start = pos + 16
        what = rng.choice(("flip", "random", "zero"))
        if what == "flip":
            i = rng.randrange(28, len(body))
            data[start + i] ^= 1 << rng.randrange(8)
        elif what == "random":
            data[start + 28:start + len(body)] = rng.randbytes(len(body) - 28)
        else:
            data[start + 28:start + len(body)] = bytes(len(body) - 28)
    path = tmp_path / "server.pcap"
    path.write_bytes(bytes(data))
    view = read_wire(path, [FIXTURES / stack / "keys.log"])
    assert 0 < view.undecrypted <= 40 + 5  # a mangled header can hide a coalesced packet or two
    decrypted = sum(1 for d in view.datagrams for p in d.packets if p.pn is not None)
    assert decrypted >= len(records) - 40 - 10


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_frame_parser_raises_only_frame_error(payload):
    try:
        frames = qf.parse_frames(payload)
    except qf.FrameError as err:
        assert isinstance(err.frames, tuple)
    else:
        assert all(hasattr(f, "name") for f in frames)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.integers(0, 400), st.binary(max_size=200), max_size=5), st.sampled_from([1, 2, 8]))
def test_handshake_parsers_never_raise(chunks, msg_type):
    facts = qf.hello_facts(chunks, msg_type)
    assert set(facts) <= {"client_random", "cipher_suite", "ack_delay_exponent"}


_WHOLE: dict[str, object] = {}


@settings(max_examples=80, deadline=None)
@given(keep=st.integers(0, 30), snaplen=st.integers(0, 2**32 - 1),
       bad=st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.binary(max_size=80)),
                    min_size=1, max_size=3))
def test_record_lengths_of_any_size(keep, snaplen, bad):
    """Huge or lying record lengths (caplen up to 4 GiB, any snaplen) after `keep`
    good records: no exception, no 4 GiB allocation, and the good prefix is read as in
    the whole file."""
    import tempfile
    from pathlib import Path

    data = _fixture_bytes("quinn")
    endian = ">" if data[:4] in (b"\xa1\xb2\x3c\x4d", b"\xa1\xb2\xc3\xd4") else "<"
    records = list(_records(data))
    head = bytearray(data[:24])
    struct.pack_into(endian + "I", head, 16, snaplen)
    good = b"".join(h + body for _, h, body in records[:keep])
    tail = b"".join(records[keep][1][:8] + struct.pack(endian + "II", caplen, orig) + body
                    for caplen, orig, body in bad)
    whole = _WHOLE.setdefault("quinn", load("quinn"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "server.pcap"
        path.write_bytes(bytes(head) + good + tail)
        view = read_wire(path, [FIXTURES / "quinn" / "keys.log"])
    n = min(len(view.datagrams), len(whole.datagrams))
    assert n >= keep - 1  # the good records (the last may be taken apart by the bad one)
    for got, want in zip(view.datagrams[:keep - 1], whole.datagrams[:keep - 1]):
        assert [(p.kind, p.pn) for p in got.packets] == [(p.kind, p.pn) for p in want.packets]
