"""The parts of a qlog event the dialects read, as msgspec types for a pruning decode.

`qlog.read_raw(path, prune=True)` (what `read_traces` uses) decodes JSON-SEQ event
records into these TypedDicts: plain dicts holding only the keys below, so stream
frames' offsets, connection IDs, datagram events' payloads and the like are skipped
inside the decoder instead of being built and freed as Python objects (about a sixth
of the decode-and-free time of a quic-go file, bench/qlog_bench.py).

A dialect that starts reading a new key must add it here, or it reads None. The
guard is tests/test_qlog_readers.py, which converts every fixture both ways and
requires identical traces. Every value is `Any`: type checks stay in the dialects,
where a wrong type skips one event rather than the whole block.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Frame(TypedDict, total=False):
    frame_type: Any
    acked_ranges: Any  # ack frames: packet_acked is derived from them


class Header(TypedDict, total=False):
    packet_type: Any
    packet_number: Any
    length: Any
    packet_size: Any


class RawInfo(TypedDict, total=False):
    length: Any


class Data(TypedDict, total=False):
    # packet events (header-less variants too: aioquic, picoquic)
    header: Header
    frames: list[Frame]
    raw: RawInfo
    packet_type: Any
    packet_number: Any
    type: Any
    packet_size: Any
    trigger: Any
    packet_number_space: Any  # spurious_loss
    # metrics (every dialect's METRICS keys) and quiche's own loss counter
    congestion_window: Any
    cwnd: Any
    bytes_in_flight: Any
    ssthresh: Any
    smoothed_rtt: Any
    min_rtt: Any
    latest_rtt: Any
    rtt_variance: Any
    pacing_rate: Any
    pto_count: Any
    cf_lost_packets: Any
    # congestion state, timers, messages
    new: Any
    event_type: Any
    timer_type: Any
    message: Any


class Event(TypedDict, total=False):
    time: Any
    name: Any
    data: Data
    group_id: Any
