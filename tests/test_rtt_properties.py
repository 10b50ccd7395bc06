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
                                  "test_ack_delay_is_capped_at_max_ack_delay"])
def test_each_property_states_its_trigger(name):
    assert "Trigger:" in getattr(rtt, name).__doc__
