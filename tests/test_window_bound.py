"""The window the capture implies (join.wire_trace) is a lower bound on the window a
stack logs, within one datagram (harness/observe/window_bound.py), on every wire
fixture whose server logged its window; and the comparison can fail."""

from __future__ import annotations

import gzip
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from harness.observe import qlog
from harness.observe.events import Metrics, PacketSent
from harness.observe.groundtruth import read_log
from harness.observe.join import wire_trace
from harness.observe.window_bound import compare
from test_wire_decode import FIXTURES, load

#: The fixtures that kept their server's qlog (quiche's logs no packet_lost, so its
#: directory has none).
LOGGED = ("aioquic", "quic-go", "picoquic", "quinn", "tquic", "s2n-quic")


def traces(stack: str, tmp_path: Path):
    d = FIXTURES / stack
    gz = next(d.glob("server.*.gz"))
    plain = tmp_path / gz.name[:-3]
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    logged = qlog.read_traces(plain, stack, "server", read_log(d / "link.ndjson").header["start_unix_ns"])[0]
    view = load(stack)
    conn = Counter(x.conn for x in view.datagrams if x.direction == "s2c").most_common(1)[0][0]
    wire = wire_trace(view, conn, "server", stack)
    return logged, wire, max(e.size or 0 for e in wire.of(PacketSent))


@pytest.mark.parametrize("stack", LOGGED)
def test_the_wire_window_is_a_lower_bound_of_the_logged_one(stack, tmp_path):
    logged, wire, datagram = traces(stack, tmp_path)
    got = compare(logged, wire, datagram)
    assert got.samples >= 5, got
    assert got.above == 0 and got.worst_excess <= datagram, got
    # Not vacuous: on a cwnd-limited transfer under loss the bound is close.
    assert 0.6 <= got.ratio_median <= 1.0 + datagram / 12_000, got


def test_a_window_logged_too_small_breaks_the_bound(tmp_path):
    logged, wire, datagram = traces("quinn", tmp_path)
    halved = replace(logged, events=[replace(e, congestion_window=e.congestion_window // 2)
                                     if isinstance(e, Metrics) and e.congestion_window else e
                                     for e in logged.events])
    got = compare(halved, wire, datagram)
    assert got.above > got.samples // 2 and got.worst_excess > datagram, got
    assert got.held < 0.5


def test_no_logged_window_compares_nothing(tmp_path):
    logged, wire, datagram = traces("tquic", tmp_path)
    bare = replace(logged, events=[e for e in logged.events if not isinstance(e, Metrics)])
    assert compare(bare, wire, datagram).samples == 0
