"""Cross-check of the wire view against Wireshark's QUIC dissector (tshark with the same
key log): packet numbers of every 1-RTT packet and the STREAM offsets and lengths of the
first data packets agree. Skipped when tshark is not installed."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from test_wire_decode import FIXTURES, STACKS, load

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed (apt-get install tshark)")

FIELDS = ("frame.time_epoch", "quic.header_form", "quic.packet_number", "quic.stream.stream_id", "quic.stream.offset",
          "quic.stream.length")


def _tshark(stack: str) -> dict[int, dict[str, list[str]]]:
    """capture time (Unix ns) → {field: values} for every QUIC datagram tshark decodes."""
    d = FIXTURES / stack
    out = subprocess.run(
        ["tshark", "-n", "-r", str(d / "pcap" / "server.pcap"), "-o", f"tls.keylog_file:{d / 'keys.log'}",
         "-Y", "quic", "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=;",
         *[x for f in FIELDS for x in ("-e", f)]],
        capture_output=True, text=True, timeout=120, check=True).stdout
    rows = {}
    for line in out.splitlines():
        cols = line.split("\t")
        sec, _, frac = cols[0].partition(".")
        values = {f: (c.split(";") if c else []) for f, c in zip(FIELDS[1:], cols[1:])}
        rows[int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])] = values
    return rows


@pytest.mark.parametrize("stack", STACKS)
def test_packet_numbers_and_stream_offsets_agree(stack):
    ours = load(stack, "server")
    theirs = _tshark(stack)
    compared = streams = 0
    for d in ours.datagrams:
        t = theirs.get(d.t_ns)
        short = [p for p in d.packets if p.kind == "1rtt"]
        if t is None or not short:
            continue
        # tshark lists one packet number per QUIC packet; the 1-RTT one comes last.
        assert int(t["quic.packet_number"][-1]) == short[0].pn, d.t_ns
        compared += 1
        ours_streams = [f for f in short[0].frames if f.name == "stream"]
        if ours_streams and streams < 40:
            assert [int(x) for x in t["quic.stream.stream_id"]] == [f.stream_id for f in ours_streams]
            # tshark leaves out the Offset and Length fields absent on the wire (offset 0, to the end).
            offsets = {int(x) for x in t["quic.stream.offset"]}
            assert {f.offset for f in ours_streams if f.offset} <= offsets <= {f.offset for f in ours_streams}
            assert {int(x) for x in t["quic.stream.length"]} <= {f.length for f in ours_streams}
            streams += 1
    assert compared == sum(1 for d in ours.datagrams if any(p.kind == "1rtt" for p in d.packets))
    assert streams >= 40
