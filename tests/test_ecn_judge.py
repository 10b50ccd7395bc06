"""The ECN properties' judges (harness/verdict/ecn.py) and schedules: CE echoes read
from ACK_ECN frames reaching the sender, which echoes call for a congestion event
(RFC 9002 App. B.7), and whether a cut answered each; the strategies mark data
datagrams only where asked, and a storm marks everything for its span only."""

from __future__ import annotations

from types import SimpleNamespace as NS

from hypothesis import given, settings

from harness.observe.quic_frames import Ack
from harness.observe.reductions import Reduction
from harness.schedule import strategies
from harness.verdict import ecn


def _ack(t_us, largest, ce, entered=False, direction="c2s", space="application"):
    frame = Ack(largest, ((0, largest),), 0, (100, 0, ce))
    return NS(t_us=t_us, entered=entered, direction=direction, packets=[NS(space=space, frames=[frame])])


def test_echoes_are_the_acks_raising_the_ce_count_as_they_reach_the_sender():
    view = NS(datagrams=[
        _ack(1_000, 10, 0),
        _ack(2_000, 12, 1),
        _ack(2_500, 13, 1),  # the same count: no new echo
        _ack(3_000, 14, 3, entered=True),  # the sender's own datagram, not an arrival
        _ack(3_500, 15, 2, space="handshake"),  # another space's count
        _ack(4_000, 20, 3),
    ])
    echoes = ecn.ce_echoes(view)
    assert [(e.t_us, e.largest, e.ce, e.rise) for e in echoes] == [(2_000, 12, 1, 1), (4_000, 20, 3, 2)]


def _cut(t_us, before=40_000, after=20_000):
    return Reduction(t_us, before, after, None, None)


def test_an_echo_is_an_event_outside_a_recovery_period_and_needs_a_cut():
    echoes = [ecn.CeEcho(100_000, 50, 1, 1), ecn.CeEcho(130_000, 60, 2, 1), ecn.CeEcho(300_000, 90, 3, 1),
              ecn.CeEcho(400_000, 99, 4, 1)]
    sent = {("application", 50): 60_000, ("application", 60): 90_000, ("application", 90): 250_000}
    # Cut for the first echo 17 ms after it; the second's packet was sent before that
    # cut (in its recovery period: no event); the third is never answered; the
    # fourth's packet is not in the trace.
    marks = [90_000, 125_000, 290_000, 390_000]  # one link mark behind each echo
    judged = ecn.congestion_events(echoes, sent, [_cut(117_000)], 25_000, marks)
    assert [(j.echo.largest, j.cut is not None) for j in judged] == [(50, True), (90, False)]
    # A cut logged later than the reaction time does not answer.
    late = ecn.congestion_events(echoes[:1], sent, [_cut(126_000)], 25_000, marks)
    assert [j.cut for j in late] == [None]
    # A cut logged just before the ACK's capture time is the same processing.
    early = ecn.congestion_events(echoes[:1], sent, [_cut(99_500)], 25_000, marks)
    assert early[0].cut is not None


def test_a_rise_the_link_did_not_cause_is_the_senders_own_probe_and_not_judged():
    # s2n-quic's way (RFC 9002 §8.3): one link mark, then two rises from CE-marked
    # probes of the sender's own; only the first echo calls for a cut.
    echoes = [ecn.CeEcho(300_000, 19, 1, 1), ecn.CeEcho(720_000, 129, 2, 1), ecn.CeEcho(1_772_000, 640, 3, 1)]
    sent = {("application", 19): 260_000, ("application", 129): 680_000, ("application", 640): 1_730_000}
    judged = ecn.congestion_events(echoes, sent, [_cut(301_000)], 40_000, [298_000])
    assert [(j.echo.largest, j.cut is not None) for j in judged] == [(19, True)]
    # A probe's rise first, the link's mark after: the mark is the second echo's.
    echoes = [ecn.CeEcho(300_000, 19, 1, 1), ecn.CeEcho(720_000, 129, 2, 1)]
    judged = ecn.congestion_events(echoes, sent, [], 40_000, [700_000])
    assert [j.echo.largest for j in judged] == [129]
    # Two marks echoed by one rise of two count once; a later rise with no new mark is a probe's.
    echoes = [ecn.CeEcho(300_000, 19, 2, 2), ecn.CeEcho(720_000, 129, 3, 1)]
    judged = ecn.congestion_events(echoes, sent, [], 40_000, [250_000, 260_000])
    assert [j.echo.largest for j in judged] == [19]


def test_echo_times_are_each_marks_delivery_plus_the_ack_delay(tmp_path):
    from harness.observe.groundtruth import PacketRecord

    def rec(idx, marks, dep):
        return PacketRecord("s2c", idx, idx, "f", "udp", 443, 5000, 1280, dep - 20_000.0,
                            "delivered" if dep else "dropped", None if dep else "loss_iid", dep, 0, marks)

    records = [rec(0, ("ce",), 50_000.0), rec(1, (), 60_000.0), rec(2, ("ce", "held"), 40_000.0)]
    assert ecn.echo_times(records, 20_000) == [60_000.0, 70_000.0]


@settings(max_examples=30, deadline=None)
@given(strategies.ce_marks())
def test_ce_marks_mark_data_datagrams_of_the_quic_flow_on_a_deep_queue(schedule):
    assert 1 <= len(schedule.actions) <= 3
    assert all(a.action == "ce" and a.dir == "s2c" and a.flow.proto == "udp" and a.index >= 20
               for a in schedule.actions)
    assert len({a.index // 100 for a in schedule.actions}) == len(schedule.actions)
    phase = schedule.phases[0]
    assert phase.s2c.ecn_threshold_bytes is None and phase.s2c.loss is None
    assert phase.s2c.queue_bytes >= 8 * phase.s2c.rate_bps * 2 * phase.s2c.delay_us // 8_000_000 - 1


@settings(max_examples=30, deadline=None)
@given(strategies.ce_storms())
def test_a_storm_marks_every_ect_datagram_for_its_span_only(schedule):
    before, storm, after = schedule.phases
    assert before.s2c.ecn_threshold_bytes is None and after.s2c.ecn_threshold_bytes is None
    assert storm.s2c.ecn_threshold_bytes == 0 and storm.c2s.ecn_threshold_bytes is None
    assert 2_000_000 <= after.start_us - storm.start_us <= 4_000_000
    assert schedule.to_json() == type(schedule).from_json(schedule.to_json()).to_json()


def _sends(times_us, size=1280):
    return [NS(arr_us=t, size=size) for t in times_us]


def test_a_sender_holding_its_two_datagram_floor_sends_two_per_round_trip():
    # Window-limited at two datagrams, a pair every 40 ms round trip from 1 s.
    records = _sends([1_000_000 + k * 40_000 + d for k in range(30) for d in (0, 600)])
    rate = ecn.rate_at_floor(records, 1_000_000, 2_200_000, [40_000.0] * 5, 40_000, 2)
    assert rate.begin_us == 1_080_000 and rate.rtts == 28
    assert 1.9 <= rate.per_rtt <= 2.1


def test_a_sender_backing_off_on_a_timer_sends_well_below_one_per_round_trip():
    # RFC 3168's way: one datagram, then the timer doubles from one round trip.
    times, t, gap = [], 1_000_000, 40_000
    while t < 2_200_000:
        times.append(t)
        t, gap = t + gap, gap * 2
    rate = ecn.rate_at_floor(_sends(times), 1_000_000, 2_200_000, [40_000.0], 40_000, 0)
    assert rate.per_rtt < 0.25


def test_the_round_trip_is_the_median_smoothed_rtt_never_below_the_base():
    records = _sends([0])
    assert ecn.rate_at_floor(records, 0, 1e6, [30_000.0, 90_000.0, 60_000.0], 40_000, 0).rtt_us == 60_000
    assert ecn.rate_at_floor(records, 0, 1e6, [30_000.0], 40_000, 0).rtt_us == 40_000
    assert ecn.rate_at_floor(records, 0, 1e6, [], 40_000, 0).rtt_us == 40_000
