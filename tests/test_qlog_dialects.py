"""Dialect rules the small real fixtures do not exercise, on hand-made qlog files:
PTO and spurious-loss events, unit conversions, state tables, clocks, connection splits."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.observe import events as ev
from harness.observe import qlog

LINK_START_NS = 1_700_000_000_000_000_000
LINK_US = LINK_START_NS / 1000


def seq(tmp_path: Path, events: list[dict], trace: dict | None = None, name: str = "t.sqlog") -> Path:
    header = {"qlog_version": "0.3", "qlog_format": "JSON-SEQ",
              "trace": trace or {"vantage_point": {"type": "server"},
                                 "common_fields": {"reference_time": {"clock_type": "monotonic", "epoch": "unknown",
                                                                      "wall_clock_time": "2023-11-14T22:13:20Z"}}}}
    p = tmp_path / name
    p.write_bytes(b"".join(b"\x1e" + json.dumps(r).encode() + b"\n" for r in [header] + events))
    return p


def sent(t: float, pn: int, ptype: str = "1RTT") -> dict:
    return {"time": t, "name": "transport:packet_sent",
            "data": {"header": {"packet_type": ptype, "packet_number": pn}, "raw": {"length": 1252},
                     "frames": [{"frame_type": "stream"}]}}


def ack(t: float, *ranges: list[int], ptype: str = "1RTT") -> dict:
    return {"time": t, "name": "transport:packet_received",
            "data": {"header": {"packet_type": ptype, "packet_number": 0},
                     "frames": [{"frame_type": "ack", "acked_ranges": list(ranges)}]}}


def test_wall_clock_reference_and_units(tmp_path):
    # 2023-11-14T22:13:20Z is 1_700_000_000 s: the link started at that instant.
    p = seq(tmp_path, [sent(1.5, 0), {"time": 2.0, "name": "recovery:metrics_updated",
                                      "data": {"congestion_window": 12000, "smoothed_rtt": 40.5}}])
    t = qlog.read_trace(p, "quic-go", "server", LINK_START_NS)
    assert [e.t_us for e in t.events] == [1500.0, 2000.0]
    assert t.of(ev.Metrics)[0].smoothed_rtt_us == 40_500
    assert "clock: wall" in t.notes


def test_quic_go_pto_spurious_and_acks(tmp_path):
    p = seq(tmp_path, [
        sent(0, 0), sent(1, 1), sent(2, 2),
        {"time": 3, "name": "recovery:loss_timer_updated", "data": {"event_type": "expired", "timer_type": "pto"}},
        {"time": 4, "name": "recovery:metrics_updated", "data": {"pto_count": 1}},
        {"time": 5, "name": "recovery:packet_lost",
         "data": {"header": {"packet_type": "1RTT", "packet_number": 0}, "trigger": "time_threshold"}},
        ack(6, [0, 2]),
        {"time": 6, "name": "recovery:spurious_loss", "data": {"packet_number_space": "application_data",
                                                               "packet_number": 0}},
    ])
    t = qlog.read_trace(p, "quic-go", "server", LINK_START_NS)
    assert len(t.of(ev.PtoExpired)) == 1  # the timer event; pto_count is not counted twice
    assert [e.pn for e in t.of(ev.PacketAcked)] == [0, 1, 2]  # also the one declared lost
    assert t.of(ev.SpuriousLoss)[0].pn == 0 and t.of(ev.PacketLost)[0].trigger == "time_threshold"


def test_quinn_seconds_pto_from_count_and_no_trigger(tmp_path):
    trace = {"vantage_point": {"type": "unknown"}, "description": "reference_time_monotonic_us=5000000"}
    p = seq(tmp_path, [
        {"time": 0, "name": "recovery:metrics_updated", "data": {"smoothed_rtt": 0.333, "pto_count": 0,
                                                                 "ssthresh": 2**64 - 1}},
        sent(1, 7),
        {"time": 2, "name": "recovery:metrics_updated", "data": {"latest_rtt": 0.041, "pto_count": 1}},
        {"time": 3, "name": "recovery:packet_lost",
         "data": {"header": {"packet_type": "1RTT", "packet_number": 7}, "trigger": "reordering_threshold"}},
    ], trace)
    applog = tmp_path / "app.ndjson"
    applog.write_text(json.dumps({"event": "version", "t_us": 4_000_000, "wall_us": LINK_US + 1_000_000}) + "\n")
    t = qlog.read_trace(p, "quinn", "server", LINK_START_NS, applog)
    # origin: monotonic 5 s = wall link+2 s
    assert t.events[0].t_us == 2_000_000 and "clock: monotonic+applog" in t.notes
    m = t.of(ev.Metrics)
    assert m[0].smoothed_rtt_us == 333_000 and m[0].ssthresh is None and m[1].latest_rtt_us == 41_000
    assert [(p.t_us, p.pto_count) for p in t.of(ev.PtoExpired)] == [(2_002_000, 1)]
    assert t.of(ev.PacketLost)[0].trigger is None


def test_quiche_pacing_bytes_and_css(tmp_path):
    p = seq(tmp_path, [
        {"time": 0, "name": "quic:recovery_metrics_updated", "data": {"pacing_rate": 1000, "congestion_window": 9}},
        {"time": 1, "name": "quic:congestion_state_updated", "data": {"new": "conservative_slow_start"}},
        {"time": 2, "name": "quic:congestion_state_updated", "data": {"new": "bbr_startup"}},
    ])
    t = qlog.read_trace(p, "quiche", "server", LINK_START_NS)
    assert t.of(ev.Metrics)[0].pacing_rate_bps == 8000
    assert [(s.state, s.raw) for s in t.of(ev.CongestionState)] == [("SlowStart", "conservative_slow_start")]
    assert any("bbr_startup" in n for n in t.notes)


def _picoquic(tmp_path: Path, cc: str | None) -> ev.Trace:
    doc = {"qlog_version": "draft-00", "traces": [{
        "vantage_point": {"type": "server"}, "event_fields": ["relative_time", "category", "event", "data"],
        "configuration": {"time_units": "us"}, "common_fields": {"reference_time": "3000000"},
        "events": [
            [10, "transport", "packet_sent", {"packet_type": "1RTT", "header": {"packet_number": 1, "packet_size": 99}}],
            [20, "recovery", "metrics_updated", {"cwnd": 15360, "smoothed_rtt": 40000, "pacing_rate": 3000000}],
            [30, "recovery", "congestion_state_updated", {"old": "0", "new": "1"}],
            [40, "recovery", "packet_lost", {"packet_type": "1RTT", "packet_number": 1, "trigger": "timer"}],
        ]}]}
    p = tmp_path / "x.server.qlog"
    p.write_text(json.dumps(doc))
    applog = tmp_path / "app.ndjson"
    rec = {"event": "version", "t_us": 2_000_000, "wall_us": LINK_US + 500_000}
    if cc:
        rec["cc"] = cc
    applog.write_text(json.dumps(rec) + "\n")
    return qlog.read_trace(p, "picoquic", "server", LINK_START_NS, applog)


def test_picoquic_tables_units_and_monotonic_clock(tmp_path):
    t = _picoquic(tmp_path, "cubic")
    assert t.events[0].t_us == 1_500_010  # 3 s monotonic = link + 1.5 s, plus 10 µs
    m = t.of(ev.Metrics)[0]
    assert (m.congestion_window, m.smoothed_rtt_us, m.pacing_rate_bps) == (15360, 40_000, 3_000_000)
    assert [s.state for s in t.of(ev.CongestionState)] == ["Recovery"]  # cubic's 1
    assert t.of(ev.PacketLost)[0].trigger == "pto_expired"
    assert [s.state for s in _picoquic(tmp_path, "newreno").of(ev.CongestionState)] == ["CongestionAvoidance"]
    bbr = _picoquic(tmp_path, "bbr")
    assert not bbr.of(ev.CongestionState) and any("packs its states" in n for n in bbr.notes)


def test_aioquic_pto_declared_losses_are_counted(tmp_path):
    base = 1_700_000_000_000.0  # ms since the epoch = the link's start
    events = [
        {"time": base + 1, "name": "transport:packet_sent",
         "data": {"header": {"packet_type": "1RTT", "packet_number": n}, "frames": [{"frame_type": "stream"}]}}
        for n in range(6)]
    events += [
        {"time": base + 50, "name": "transport:packet_received",
         "data": {"header": {"packet_type": "1RTT", "packet_number": 0},
                  "frames": [{"frame_type": "ack", "acked_ranges": [[1, 4]]}]}},
        {"time": base + 51, "name": "recovery:packet_lost", "data": {"type": "1RTT", "packet_number": 0}},
        {"time": base + 300, "name": "recovery:packet_lost", "data": {"type": "1RTT", "packet_number": 5}},
        {"time": base + 301, "name": "recovery:metrics_updated", "data": {"cwnd": 12000, "latest_rtt": 49.0}},
    ]
    p = tmp_path / "a.qlog"
    p.write_text(json.dumps({"qlog_version": "0.3", "traces": [{"events": events}]}))
    t = qlog.read_trace(p, "aioquic", "client", LINK_START_NS)
    assert t.events[0].t_us == 1000 and "clock: epoch (event times are wall-clock values)" in t.notes
    assert [e.trigger for e in t.of(ev.PacketLost)] == [None, None]
    assert any(n.startswith("aioquic: 1 packet_lost above the largest acknowledged") for n in t.notes)
    assert t.of(ev.Metrics)[0].congestion_window == 12000


def test_interleaved_connections_are_split_and_a_changing_group_is_not(tmp_path):
    evs = [dict(sent(i, i), group_id="ab"[i % 2]) for i in range(6)]
    traces = qlog.read_traces(seq(tmp_path, evs), "quic-go", "server", LINK_START_NS)
    assert [len(t.of(ev.PacketSent)) for t in traces] == [3, 3]
    evs = [dict(sent(i, i), group_id="a" if i < 2 else "b") for i in range(6)]
    (one,) = qlog.read_traces(seq(tmp_path, evs, name="u.sqlog"), "quinn", "server", LINK_START_NS)
    assert len(one.of(ev.PacketSent)) == 6 and any("group_id changes" in n for n in one.notes)


def test_acks_ignore_unsent_and_huge_ranges(tmp_path):
    p = seq(tmp_path, [sent(0, 3), sent(0, 4), ack(0.5, "junk"), ack(1, [0, 2**62]), ack(2, [4])])
    t = qlog.read_trace(p, "quiche", "server", LINK_START_NS)
    assert [e.pn for e in t.of(ev.PacketAcked)] == [3, 4]
    assert any("skipped" in n for n in t.notes)


def test_unknown_stack_reads_as_standard_qlog(tmp_path):
    t = qlog.read_trace(seq(tmp_path, [sent(0, 1)]), "msquic", "client", LINK_START_NS)
    assert t.of(ev.PacketSent) and any("no dialect module" in n for n in t.notes)


@settings(max_examples=300, deadline=None)
@given(sent=st.sets(st.integers(0, 60), max_size=40),
       acks=st.lists(st.tuples(st.floats(0, 100), st.lists(st.tuples(st.integers(-5, 70), st.integers(0, 12)),
                                                          max_size=4)), max_size=12))
def test_derive_acks_is_the_first_covering_ack(sent, acks):
    """The derivation (which skips what is already acknowledged) against the plain
    definition: each sent pn is acked at the first ACK frame, in time order, covering it."""
    from harness.observe.dialects._acks import derive_acks

    frames = [(t, "application", [[lo, lo + n] for lo, n in ranges]) for t, ranges in acks]
    got, bad = derive_acks({"application": set(sent)}, frames)
    want = {}
    for t, _, ranges in sorted(frames, key=lambda a: a[0]):
        for lo, hi in ranges:
            for pn in range(lo, hi + 1):
                if pn in sent and pn not in want:
                    want[pn] = t
    assert bad == 0 and {a.pn: a.t_us for a in got} == want and len(got) == len(want)


def test_derived_acks_keep_their_place_among_same_instant_events(tmp_path):
    """A window update logged at the same instant after the packet carrying the ACK
    follows the ack derived from it (virtual time makes such ties systematic)."""
    p = seq(tmp_path, [
        sent(1.0, 0), sent(1.0, 1),
        {"time": 2.0, "name": "recovery:metrics_updated", "data": {"bytes_in_flight": 2504}},
        ack(3.0, [0, 1]),
        {"time": 3.0, "name": "recovery:metrics_updated", "data": {"bytes_in_flight": 0}},
    ])
    t = qlog.read_trace(p, "quinn", "server", LINK_START_NS)
    kinds = [(type(e).__name__, getattr(e, "pn", None)) for e in t.events if e.t_us == t.events[-1].t_us]
    assert kinds == [("PacketAcked", 0), ("PacketAcked", 1), ("Metrics", None)]


def test_two_acks_in_one_instant_each_keep_their_place(tmp_path):
    """A coarse clock (ngtcp2's whole milliseconds) logs two ACKs and the window each
    grew in one instant: each ACK's acknowledgements sit before its own window, not
    all before the first (they were placed by time before, and trace validation saw
    the second growth with no acknowledgement behind it)."""
    p = seq(tmp_path, [
        sent(1.0, 0), sent(1.0, 1), sent(1.0, 2), sent(1.0, 3),
        ack(3.0, [0, 1]),
        {"time": 3.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 13000}},
        ack(3.0, [0, 3]),
        {"time": 3.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 14000}},
    ])
    t = qlog.read_trace(p, "quinn", "server", LINK_START_NS)
    kinds = [(type(e).__name__, getattr(e, "pn", None)) for e in t.events if e.t_us == t.events[-1].t_us]
    assert kinds == [("PacketAcked", 0), ("PacketAcked", 1), ("Metrics", None),
                     ("PacketAcked", 2), ("PacketAcked", 3), ("Metrics", None)]


def test_ngtcp2_s_losses_come_after_the_acks_of_the_frame_that_revealed_them():
    """ngtcp2 logs packet_lost before the packet whose ACK revealed the losses: trace
    validation replays the acknowledgements first (a packet is lost only below the
    largest acknowledged), so the cut that follows has its cause."""
    from harness.model import tracefile

    events = [ev.PacketSent(1.0, i, "application", 1200) for i in range(4)]
    events += [ev.PacketLost(5.0, 0, "application"), ev.PacketAcked(5.0, 2, "application"),
               ev.PacketAcked(5.0, 3, "application"), ev.Metrics(5.0, congestion_window=6000)]
    events = [ev.Metrics(0.5, congestion_window=12000)] + events
    trace = ev.Trace("ngtcp2", "server", events, "x")
    kinds = [r.k for r in tracefile.from_trace(trace, "newreno").records]
    assert kinds[-5:] == ["acked", "acked", "lost", "cwnd", "ackend"]
    # A stack that logs them the other way round keeps its file order.
    kinds = [r.k for r in tracefile.from_trace(ev.Trace("quinn", "server", events, "x"), "newreno").records]
    assert kinds[-5:] == ["lost", "acked", "acked", "cwnd", "ackend"]


def test_quic_go_s_ack_goes_before_the_effects_it_logged_first(tmp_path):
    """quic-go logs packet_received after handling its frames: the window it grew
    and the loss it declared come first in the file. The acks derived from the frame
    go where those effects begin (after the last send), at their time; what a PTO
    expiry logs is the timer's, not the next packet's."""
    p = seq(tmp_path, [
        sent(1.0, 0), sent(1.0, 1), sent(1.1, 2), sent(1.1, 3), sent(1.1, 4), sent(1.2, 5),
        {"time": 2.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 20000}},
        {"time": 2.001, "name": "recovery:packet_lost", "data": {"header": {"packet_type": "1RTT",
                                                                             "packet_number": 0}}},
        ack(2.002, [1, 4]),
        {"time": 5.0, "name": "recovery:loss_timer_updated", "data": {"event_type": "expired",
                                                                      "timer_type": "pto"}},
        {"time": 5.001, "name": "recovery:metrics_updated", "data": {"pto_count": 1}},
        ack(25.0, [0, 0]),
        {"time": 40.0, "name": "recovery:loss_timer_updated", "data": {"event_type": "expired",
                                                                       "timer_type": "ack"}},
        {"time": 40.001, "name": "recovery:congestion_state_updated", "data": {"new": "recovery"}},
        {"time": 60.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 10000}},
        ack(60.002, [5, 5]),
    ])
    t = qlog.read_trace(p, "quic-go", "server", LINK_START_NS)
    order = [(type(e).__name__, getattr(e, "pn", None)) for e in t.events if not isinstance(e, ev.PacketSent)]
    assert order[:6] == [("PacketAcked", 1), ("PacketAcked", 2), ("PacketAcked", 3), ("PacketAcked", 4),
                         ("Metrics", None), ("PacketLost", 0)], order
    acked = [e for e in t.events if isinstance(e, ev.PacketAcked)]
    grown = next(e for e in t.events if isinstance(e, ev.Metrics) and e.congestion_window)
    assert {e.t_us for e in acked[:4]} == {grown.t_us}, "the acks take the time their first effect was logged"
    late = next(e for e in acked if e.pn == 0)
    assert late.t_us > next(e.t_us for e in t.events if isinstance(e, ev.PtoExpired)) + 10_000, \
        "after a timer expired, the timer's effects are not the next packet's"
    assert order.index(("PacketAcked", 0)) > order.index(("PtoExpired", None))
    # An ACK 20 ms after a loss timer's effects: only what it logged just before it moves.
    last = [(type(e).__name__, getattr(e, "pn", None)) for e in t.events if e.t_us >= late.t_us + 10_000]
    assert last == [("CongestionState", None), ("PacketAcked", 5), ("Metrics", None)], last


def test_firefox_s_epoch_reference_parameters_and_states(tmp_path):
    """neqo (Firefox): reference_time in ms since the epoch, relative times (clock
    "wall"); recovery:parameters_set's initial window is the first logged window, since
    metrics_updated logs the window only once it changes; states and triggers as the
    draft names them; no PTO expiry is claimed."""
    trace = {"vantage_point": {"name": "neqo-Client", "type": "client"},
             "common_fields": {"reference_time": LINK_US / 1000 + 500.0, "time_format": "relative"}}
    p = seq(tmp_path, [
        {"time": 0.25, "name": "recovery:parameters_set",
         "data": {"initial_congestion_window": 12520, "loss_reduction_factor": 0.5}},
        {"time": 0.25, "name": "recovery:congestion_state_updated", "data": {"new": "slow_start"}},
        sent(0.25, 16, "initial"),
        ack(40.0, [16, 16], ptype="initial"),
        {"time": 40.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 13772}},
        sent(41.0, 0), sent(41.5, 1), sent(42.0, 2), sent(42.5, 3),
        ack(90.0, [1, 3]),
        {"time": 90.0, "name": "recovery:packet_lost",
         "data": {"header": {"packet_type": "1RTT", "packet_number": 0}, "trigger": "reordering_threshold"}},
    ], trace=trace)
    t = qlog.read_trace(p, "firefox", "client", LINK_START_NS)
    windows = [(m.t_us, m.congestion_window) for m in t.of(ev.Metrics) if m.congestion_window]
    assert windows == [(500_250.0, 12520), (540_000.0, 13772)]
    assert "clock: wall" in t.notes
    assert [s.state for s in t.of(ev.CongestionState)] == ["SlowStart"]
    (lost,) = t.of(ev.PacketLost)
    assert (lost.pn, lost.trigger) == (0, "reordering_threshold")
    assert sorted((a.space, a.pn) for a in t.of(ev.PacketAcked)) == [
        ("application", 1), ("application", 2), ("application", 3), ("initial", 16)]
    assert not t.of(ev.PtoExpired)


def test_firefox_s_losses_go_before_the_cut_they_caused(tmp_path):
    """neqo logs an ACK's effects (the cut, the state) before the losses it declared,
    at the same instant: the losses are read back where their cause is."""
    trace = {"vantage_point": {"type": "client"},
             "common_fields": {"reference_time": LINK_US / 1000, "time_format": "relative"}}
    p = seq(tmp_path, [
        *(sent(10.0 + k, k) for k in range(6)),
        {"time": 60.0, "name": "transport:packet_received",
         "data": {"header": {"packet_type": "1RTT", "packet_number": 9},
                  "frames": [{"frame_type": "ack", "acked_ranges": [[0, 0], [4, 5]]}]}},
        {"time": 60.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 8764, "ssthresh": 8764}},
        {"time": 60.0, "name": "recovery:congestion_state_updated", "data": {"old": "slow_start", "new": "recovery"}},
        {"time": 60.0, "name": "recovery:packet_lost",
         "data": {"header": {"packet_type": "1RTT", "packet_number": 1}, "trigger": "reordering_threshold"}},
        {"time": 60.0, "name": "recovery:packet_lost",
         "data": {"header": {"packet_type": "1RTT", "packet_number": 2}, "trigger": "reordering_threshold"}},
        sent(61.0, 6),
    ], trace=trace)
    t = qlog.read_trace(p, "firefox", "client", LINK_START_NS)
    at = [type(e).__name__ + (f"({e.pn})" if hasattr(e, "pn") else "") for e in t.events if e.t_us == 60_000.0]
    assert at == ["PacketAcked(0)", "PacketAcked(4)", "PacketAcked(5)", "PacketLost(1)", "PacketLost(2)",
                  "Metrics", "CongestionState"], at


def test_firefox_s_timer_losses_go_before_the_cut_too(tmp_path):
    """The same after neqo's loss timer expires: its cut, then its losses, in the file."""
    trace = {"vantage_point": {"type": "client"},
             "common_fields": {"reference_time": LINK_US / 1000, "time_format": "relative"}}
    p = seq(tmp_path, [
        sent(10.0, 0), sent(11.0, 1),
        {"time": 90.0, "name": "recovery:loss_timer_updated", "data": {"timer_type": "ack", "event_type": "expired"}},
        {"time": 90.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 8764, "ssthresh": 8764}},
        {"time": 90.0, "name": "recovery:packet_lost",
         "data": {"header": {"packet_type": "1RTT", "packet_number": 0}, "trigger": "time_threshold"}},
    ], trace=trace)
    t = qlog.read_trace(p, "firefox", "client", LINK_START_NS)
    at = [type(e).__name__ for e in t.events if e.t_us == 90_000.0]
    assert at == ["PacketLost", "Metrics"], at


def test_kwik_s_trace_is_read_in_the_order_kwik_wrote_it(tmp_path):
    """kwik's hook stamps an ACK's packet with the instant the datagram arrived and the
    window it grew with the moment of the call: under load the ACK's time comes
    milliseconds before a window already logged. File order is kwik's order, so the
    trace is read monotone in it; other stacks keep their own times."""
    events = [
        sent(1.0, 0), sent(1.0, 1),
        {"time": 9.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 12000, "smoothed_rtt": 40}},
        ack(4.0, [0, 1]),  # arrived at 4 ms, handled after the window logged at 9 ms
        {"time": 10.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 14504, "smoothed_rtt": 40}},
    ]
    t = qlog.read_trace(seq(tmp_path, events), "kwik", "server", LINK_START_NS)
    kinds = [type(e).__name__ for e in t.events]
    assert kinds == ["PacketSent", "PacketSent", "Metrics", "PacketAcked", "PacketAcked", "Metrics"]
    assert [e.t_us for e in t.of(ev.PacketAcked)] == [9000.0, 9000.0]
    other = qlog.read_trace(seq(tmp_path, events, name="o.sqlog"), "quinn", "server", LINK_START_NS)
    assert [e.t_us for e in other.of(ev.PacketAcked)] == [4000.0, 4000.0]


def test_kwik_s_window_comes_from_its_recovery_manager_only(tmp_path):
    """A send-thread snapshot (metrics without an RTT estimate) is left out once ACKs
    are handled: it can predate a cut the receive thread just made, or an ACK it has
    handled. The first flight's (the initial window) stays."""
    events = [
        {"time": 0.5, "name": "recovery:metrics_updated", "data": {"congestion_window": 12000, "bytes_in_flight": 1252}},
        sent(1.0, 0), sent(1.0, 1),
        {"time": 2.0, "name": "recovery:metrics_updated",
         "data": {"congestion_window": 25000, "bytes_in_flight": 2504, "smoothed_rtt": 40, "latest_rtt": 40}},
        {"time": 3.0, "name": "recovery:metrics_updated", "data": {"congestion_window": 25000, "bytes_in_flight": 3756}},
        {"time": 4.0, "name": "recovery:metrics_updated",
         "data": {"congestion_window": 12500, "bytes_in_flight": 1252, "smoothed_rtt": 40, "latest_rtt": 40}},
    ]
    t = qlog.read_trace(seq(tmp_path, events), "kwik", "server", LINK_START_NS)
    ms = t.of(ev.Metrics)
    # The first flight's snapshot stays (no ACK handled yet: nothing to race).
    assert [m.congestion_window for m in ms] == [12000, 25000, 12500]
    assert [m.bytes_in_flight for m in ms] == [1252, 2504, 1252]
