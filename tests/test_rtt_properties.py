"""The RTT properties (properties/test_rtt.py) can fail: their judging functions,
fed fabricated traces and capture joins of a broken estimator, raise the deviation
each names, and pass the same traces of a conformant one. Plus the capture helpers
they stand on (analysis.acks_received, max_ack_delay from the transport parameters)."""

from __future__ import annotations

import pytest

from harness.observe.events import Metrics, Trace
from harness.verdict.analysis import AckSeen
from harness.verdict.deviation import Deviation
from properties import test_rtt as rtt
from properties import test_rtt_unconfirmed as unconfirmed

PATH = 40_000.0
JOIN = rtt.VIRTUAL_JOIN


def _trace(*metrics: Metrics) -> Trace:
    return Trace("fabricated", "server", list(metrics), "fabricated.qlog")


def _ack(t, sample, largest=10, delay=0, newly=2, new_largest=True, eliciting=True, space="application"):
    return AckSeen(t, space, largest, delay, newly, new_largest, eliciting, sample)


def _kind(fn, *args) -> str | None:
    try:
        fn(*args)
    except Deviation as e:
        return e.kind
    return None


# -- §5.1: which frames give samples -------------------------------------------------

FRAMES = [_ack(100_000, 41_000), _ack(101_000, 43_500, largest=10, newly=1, new_largest=False),
          _ack(102_000, 41_200, largest=12), _ack(103_000, 44_000, largest=12, newly=0, new_largest=False,
                                                  eliciting=False)]


def test_a_sample_from_a_frame_without_a_new_largest_fails():
    trace = _trace(Metrics(100_000, latest_rtt_us=41_000), Metrics(101_000, latest_rtt_us=43_500))
    assert _kind(rtt.judge_sample_sources, "x", trace, FRAMES, 25_000, JOIN, "new-largest") \
        == "rtt-sample-from-old-largest"
    # The same frame newly acknowledged ack-eliciting packets: the MUST rule has nothing against it.
    assert _kind(rtt.judge_sample_sources, "x", trace, FRAMES, 25_000, JOIN, "ack-eliciting") is None


def test_a_sample_from_a_frame_with_nothing_ack_eliciting_fails():
    trace = _trace(Metrics(100_000, latest_rtt_us=41_000), Metrics(102_000, latest_rtt_us=41_200),
                   Metrics(103_000, latest_rtt_us=44_000))
    assert _kind(rtt.judge_sample_sources, "x", trace, FRAMES, 25_000, JOIN, "ack-eliciting") \
        == "rtt-sample-without-ack-eliciting"


def test_samples_from_the_right_frames_pass_and_count_the_triggers():
    # aioquic and quic-go log the adjusted sample: raw 46 ms less a 5 ms ACK Delay.
    frames = FRAMES + [_ack(104_000, 46_000, largest=14, delay=5_000)]
    trace = _trace(Metrics(100_000, latest_rtt_us=41_000), Metrics(102_000, latest_rtt_us=41_200),
                   Metrics(102_500, latest_rtt_us=41_200),  # a repeat: no new sample
                   Metrics(104_000, latest_rtt_us=41_000.5))
    assert rtt.judge_sample_sources("x", trace, frames, 25_000, JOIN, "new-largest") == 2
    assert rtt.judge_sample_sources("x", trace, frames, 25_000, JOIN, "ack-eliciting") == 1


def test_a_sample_only_an_eligible_frame_nearby_explains_passes():
    # A stale frame arriving with the eligible one explains the value too: no verdict.
    frames = [_ack(100_000, 41_000), _ack(100_000, 41_000, newly=1, new_largest=False)]
    trace = _trace(Metrics(100_000, latest_rtt_us=41_000))
    assert _kind(rtt.judge_sample_sources, "x", trace, frames, 25_000, JOIN, "new-largest") is None


# -- §5.2: min_rtt ------------------------------------------------------------------

def test_min_rtt_not_set_to_the_first_sample_fails():
    trace = _trace(Metrics(20_000, latest_rtt_us=333_000, min_rtt_us=333_000),  # placeholder before any ACK
                   Metrics(100_000, latest_rtt_us=41_000, min_rtt_us=40_000))
    assert _kind(rtt.judge_min_rtt, "x", trace, 99_000, PATH, []) == "min-rtt-not-first-sample"


def test_min_rtt_above_a_sample_fails_and_a_reset_after_persistent_congestion_passes():
    samples = [Metrics(100_000, latest_rtt_us=41_000, min_rtt_us=41_000),
               Metrics(101_000, latest_rtt_us=40_500),  # min_rtt stays 41 ms: above this sample
               Metrics(102_000, latest_rtt_us=42_000)]
    assert _kind(rtt.judge_min_rtt, "x", _trace(*samples), 99_000, PATH, []) == "min-rtt-above-a-sample"
    good = [Metrics(100_000, latest_rtt_us=41_000, min_rtt_us=41_000),
            Metrics(101_000, latest_rtt_us=40_500, min_rtt_us=40_500),
            Metrics(900_000, latest_rtt_us=60_000, min_rtt_us=60_000)]  # reset after the collapse at 500 ms
    assert rtt.judge_min_rtt("x", _trace(*good), 99_000, PATH, [500_000.0]) == 3
    # The same rise with no collapse before it is a refresh 0.8 s after the first sample.
    assert _kind(rtt.judge_min_rtt, "x", _trace(*good), 99_000, PATH, []) == "min-rtt-refreshed-too-soon"


def test_a_refresh_is_allowed_once_per_interval():
    """§5.2's "SHOULD NOT refresh the min_rtt value too often": a rise 10 s after the
    first sample is a refresh, judged from then on; a second one 2 s later is too soon."""
    t0 = 100_000
    later = t0 + rtt.REFRESH_INTERVAL_US
    once = [Metrics(t0, latest_rtt_us=41_000, min_rtt_us=41_000),
            Metrics(later, latest_rtt_us=45_000, min_rtt_us=45_000),
            Metrics(later + 1_000, latest_rtt_us=44_000, min_rtt_us=44_000)]
    assert rtt.judge_min_rtt("x", _trace(*once), 99_000, PATH, []) == 3
    stuck = once[:2] + [Metrics(later + 1_000, latest_rtt_us=44_000)]  # min_rtt left above the sample
    assert _kind(rtt.judge_min_rtt, "x", _trace(*stuck), 99_000, PATH, []) == "min-rtt-above-a-sample"
    twice = once + [Metrics(later + 2_000_000, latest_rtt_us=50_000, min_rtt_us=50_000)]
    assert _kind(rtt.judge_min_rtt, "x", _trace(*twice), 99_000, PATH, []) == "min-rtt-refreshed-too-soon"


def test_min_rtt_below_the_path_fails():
    trace = _trace(Metrics(100_000, latest_rtt_us=30_000, min_rtt_us=30_000))
    assert _kind(rtt.judge_min_rtt, "x", trace, 99_000, PATH, []) == "rtt-below-path-delay"


# -- §5.3: the ACK Delay ------------------------------------------------------------

def test_smoothed_rtt_below_min_rtt_fails():
    # Full ACK Delay subtracted below min_rtt: 7/8·41 + 1/8·(65.6 − 25) = 40.95 ms < 41 ms.
    trace = _trace(Metrics(100_000, latest_rtt_us=41_000, min_rtt_us=41_000, smoothed_rtt_us=41_000),
                   Metrics(125_000, latest_rtt_us=65_600, smoothed_rtt_us=40_950))
    assert _kind(rtt.judge_smoothed_floor, "x", trace, 99_000, PATH) == "smoothed-rtt-below-min-rtt"
    ok = _trace(Metrics(100_000, latest_rtt_us=41_000, min_rtt_us=41_000, smoothed_rtt_us=41_000),
                Metrics(125_000, latest_rtt_us=65_600, smoothed_rtt_us=44_075))
    assert _kind(rtt.judge_smoothed_floor, "x", ok, 99_000, PATH) is None


def test_a_sender_without_min_rtt_is_held_to_its_least_sample():
    # kwik logs samples but no min_rtt: the floor is the least sample (§5.2), so the
    # same subtraction below it fails, and the conformant update passes.
    trace = _trace(Metrics(100_000, latest_rtt_us=41_000, smoothed_rtt_us=41_000),
                   Metrics(125_000, latest_rtt_us=65_600, smoothed_rtt_us=40_950))
    assert _kind(rtt.judge_smoothed_floor, "x", trace, 99_000, PATH) == "smoothed-rtt-below-min-rtt"
    ok = _trace(Metrics(100_000, latest_rtt_us=41_000, smoothed_rtt_us=41_000),
                Metrics(125_000, latest_rtt_us=65_600, smoothed_rtt_us=44_075))
    assert _kind(rtt.judge_smoothed_floor, "x", ok, 99_000, PATH) is None


def test_min_rtt_is_a_capability_of_its_own():
    from harness.observe import dialects
    assert not dialects.get("kwik").logs("min_rtt") and dialects.get("kwik").logs("rtt_samples")
    assert dialects.get("aioquic").logs("min_rtt")


def test_floor_bites_where_the_delay_would_cross_the_least_sample():
    frames = [_ack(100_000, 41_000), _ack(125_000, 65_600, largest=12, delay=25_000),
              _ack(126_000, 70_000, largest=14, delay=5_000)]
    assert rtt.floor_bites(frames, 25_000) == [frames[1]]


def test_an_uncapped_ack_delay_fails():
    # ACK Delay 50 ms > max_ack_delay 25 ms on a 100 ms sample: the least adjusted
    # sample allowed is 75 ms; subtracting all 50 ms gives 50 ms.
    f = _ack(200_000, 100_000, largest=20, delay=50_000)
    before = Metrics(150_000, latest_rtt_us=41_000, min_rtt_us=41_000, smoothed_rtt_us=41_000)
    wrong = Metrics(200_000, latest_rtt_us=100_000, smoothed_rtt_us=41_000 * 7 / 8 + 50_000 / 8)
    assert _kind(rtt.judge_ack_delay_cap, "x", _trace(before, wrong), [f], 25_000, JOIN) \
        == "ack-delay-above-max-ack-delay"
    right = Metrics(200_000, latest_rtt_us=100_000, smoothed_rtt_us=41_000 * 7 / 8 + 75_000 / 8)
    assert rtt.judge_ack_delay_cap("x", _trace(before, right), [f], 25_000, JOIN) == 1



# -- §5.3 before confirmation: the whole ACK Delay, not the capped one ---------------

#: The client was last seen unconfirmed (a Handshake packet) after the samples below.
UNCONFIRMED = 300_000


def _early(implied_us: float, sample=67_000, delay=45_000, min_rtt=27_000):
    """A frame before confirmation (RTT `sample`, ACK Delay `delay`) and the
    smoothed_rtt update that implies an adjusted sample of `implied_us`."""
    f = _ack(200_000, sample, largest=20, delay=delay)
    before = Metrics(150_000, latest_rtt_us=min_rtt, min_rtt_us=min_rtt, smoothed_rtt_us=min_rtt)
    after = Metrics(200_000, latest_rtt_us=sample, min_rtt_us=min_rtt, smoothed_rtt_us=min_rtt * 7 / 8 + implied_us / 8)
    return _trace(before, after), [f]


def test_a_delay_capped_before_confirmation_fails():
    # 67 ms less the whole 45 ms is below min_rtt (27 ms), so §5.3 subtracts nothing:
    # 67 ms; capped at 25 ms it subtracts 25: 42 ms.
    trace, frames = _early(42_000)
    assert _kind(unconfirmed.judge_cap_before_confirmation, "x", trace, frames, 25_000, JOIN, UNCONFIRMED) \
        == "max-ack-delay-applied-before-confirmation"


@pytest.mark.parametrize("sample, delay, implied", [
    (67_000, 45_000, 67_000),  # the whole delay would cross min_rtt: none subtracted
    (100_000, 45_000, 55_000),  # the whole delay subtracted
])
def test_the_whole_delay_before_confirmation_passes(sample, delay, implied):
    trace, frames = _early(implied, sample, delay)
    assert unconfirmed.judge_cap_before_confirmation("x", trace, frames, 25_000, JOIN, UNCONFIRMED) == 1


def test_a_sample_no_reading_explains_or_that_fits_both_is_not_judged():
    # 60 ms: neither the whole delay (55), the cap (75) nor none (100).
    trace, frames = _early(60_000, 100_000, 45_000)
    assert unconfirmed.judge_cap_before_confirmation("x", trace, frames, 25_000, JOIN, UNCONFIRMED) == 0
    # An ACK Delay of 25.01 ms: capped and whole are the same reading.
    trace, frames = _early(74_990, 100_000, 25_010)
    assert unconfirmed.judge_cap_before_confirmation("x", trace, frames, 25_000, JOIN, UNCONFIRMED) == 0


def test_a_sample_taken_after_the_client_was_last_seen_unconfirmed_is_not_judged():
    """A client MAY confirm on an ACK of a 1-RTT packet (RFC 9001 §4.1.2): capping a
    sample it took after that is the MUST, not a deviation."""
    trace, frames = _early(42_000)
    assert unconfirmed.judge_cap_before_confirmation("x", trace, frames, 25_000, JOIN, 199_000) == 0


def test_the_client_is_last_seen_unconfirmed_at_its_last_handshake_packet_before_handshake_done():
    from types import SimpleNamespace as NS

    def datagram(t, direction, entered, space, frame="crypto"):
        return NS(t_us=t, direction=direction, entered=entered,
                  packets=[NS(space=space, frames=[NS(name=frame)])])

    view = NS(datagrams=[datagram(10, "s2c", True, "handshake"), datagram(50, "s2c", True, "handshake"),
                         datagram(60, "c2s", False, "application", "handshake_done"),
                         datagram(70, "s2c", True, "handshake"),  # after HANDSHAKE_DONE arrived
                         datagram(55, "s2c", False, "handshake")])  # arriving, not sent, on this side
    assert unconfirmed.last_unconfirmed_us(view) == 50
    assert unconfirmed.last_unconfirmed_us(NS(datagrams=[])) == float("-inf")


def test_whole_ms_logs_widen_the_readings_and_an_unlogged_min_rtt_allows_either_floor():
    """kwik logs smoothed_rtt in whole ms, and no min_rtt: an update of 22 → 26 ms
    implies anything from 46 to 62 ms, which cannot tell an 80 ms sample less a
    capped 25 ms delay (55 ms) from it less the whole 30 ms (50 ms): not judged.
    Logged finely, the same update is told apart, and fails."""
    f = _ack(200_000, 80_000, largest=20, delay=30_000)
    before = Metrics(150_000, latest_rtt_us=22_000, smoothed_rtt_us=22_000)
    coarse = Metrics(200_000, latest_rtt_us=80_000, smoothed_rtt_us=26_000)
    assert unconfirmed.log_resolution_us([22_000, 26_000]) == 1_000
    assert unconfirmed.judge_cap_before_confirmation("x", _trace(before, coarse), [f], 25_000, JOIN, UNCONFIRMED) == 0
    before = Metrics(150_000, latest_rtt_us=22_000.5, smoothed_rtt_us=22_000.5)
    fine = Metrics(200_000, latest_rtt_us=80_000, smoothed_rtt_us=22_000.5 * 7 / 8 + 55_000 / 8)
    assert unconfirmed.log_resolution_us([22_000.5, fine.smoothed_rtt_us]) == 1.0
    assert _kind(unconfirmed.judge_cap_before_confirmation, "x", _trace(before, fine), [f], 25_000, JOIN,
                 UNCONFIRMED) == "max-ack-delay-applied-before-confirmation"


def test_readings_follow_the_min_rtt_floor_across_the_samples_range():
    assert unconfirmed.readings(60_000, 70_000, 45_000, 20_000) == [(20_000, 25_000), (60_000, 65_000)]
    assert unconfirmed.readings(60_000, 70_000, 10_000, 20_000) == [(50_000, 60_000)]
    assert unconfirmed.readings(60_000, 70_000, 60_000, 20_000) == [(60_000, 70_000)]


def test_the_property_is_judged_on_an_upload_only():
    """A download's server confirms before any 1-RTT ACK reaches it: not applicable."""
    from types import SimpleNamespace

    inner = unconfirmed.test_max_ack_delay_is_ignored_until_the_handshake_is_confirmed.hypothesis.inner_test
    with pytest.raises(pytest.skip.Exception, match="not applicable: a server sender confirms"):
        inner(None, SimpleNamespace(direction="download"), None)


# -- the capture helpers ------------------------------------------------------------

def test_acks_received_tells_new_largest_eliciting_and_duplicates_apart():
    from harness.observe.quic_frames import Ack, Other
    from harness.observe.wire import Connection, Datagram, QuicPacket, WireView
    from harness.verdict import analysis

    def dg(t, direction, entered, packets):
        return Datagram(int(t * 1000), t, direction, "server", entered, None, ("a", 1), ("b", 2), 0, 0, 0, packets)

    def pkt(pn, frames, eliciting):
        return QuicPacket("1rtt", "application", 100, pn, tuple(frames), eliciting)

    conn = Connection(0, ("c", 1), ("s", 2), b"", 1)
    conn.max_ack_delay_us["c2s"] = 10_000
    acks = [Ack(1, ((0, 1),), 10), Ack(1, ((0, 1),), 10), Ack(2, ((0, 2),), 0)]
    view = WireView("x", "server", 0, [
        dg(0, "s2c", True, [pkt(0, [Other("stream")], True)]), dg(1, "s2c", True, [pkt(1, [Other("stream")], True)]),
        dg(2, "s2c", True, [pkt(2, [Ack(5, ((5, 5),), 0)], False)]),
        dg(40_001, "c2s", False, [pkt(7, [acks[0]], False)]),
        dg(40_002, "c2s", False, [pkt(7, [acks[0]], False)]),  # a duplicated packet: discarded
        dg(40_003, "c2s", False, [pkt(8, [acks[1]], False)]),  # the same frame again: nothing new
        dg(40_004, "c2s", False, [pkt(9, [acks[2]], False)]),  # newly acknowledges only an ACK-only packet
    ], [conn], [], [])
    got = analysis.acks_received(view)
    assert [(f.new_largest, f.eliciting, f.newly) for f in got] == [(True, True, 2), (False, False, 0),
                                                                  (True, False, 1)]
    assert got[0].sample_us == 40_000 and got[0].delay_us == 80 and got[0].gives_sample
    assert analysis.max_ack_delay_us(view) == 10_000


def test_max_ack_delay_is_read_from_the_transport_parameters():
    from aioquic.buffer import Buffer
    from aioquic.quic.packet import QuicTransportParameters, push_quic_transport_parameters

    from harness.observe import quic_frames as qf

    buf = Buffer(capacity=256)
    push_quic_transport_parameters(buf, QuicTransportParameters(max_ack_delay=40, ack_delay_exponent=4))
    tp = buf.data
    # EncryptedExtensions: type 8, 24-bit length, 16-bit extensions length, one QUIC TP extension.
    ext = (0x39).to_bytes(2, "big") + len(tp).to_bytes(2, "big") + tp
    body = len(ext).to_bytes(2, "big") + ext
    msg = bytes([qf.ENCRYPTED_EXTENSIONS]) + len(body).to_bytes(3, "big") + body
    assert qf.hello_facts({0: msg}, qf.ENCRYPTED_EXTENSIONS) == {"ack_delay_exponent": 4, "max_ack_delay_us": 40_000}


@pytest.mark.parametrize("name", ["test_rtt_samples_need_a_new_largest_acknowledged",
                                  "test_rtt_samples_need_an_ack_eliciting_packet", "test_min_rtt_is_the_least_rtt_sample",
                                  "test_ack_delay_never_takes_a_sample_below_min_rtt",
                                  "test_ack_delay_is_capped_at_max_ack_delay",
                                  "test_max_ack_delay_is_ignored_until_the_handshake_is_confirmed"])
def test_each_property_states_its_trigger(name):
    assert "Trigger:" in getattr(rtt if hasattr(rtt, name) else unconfirmed, name).__doc__
