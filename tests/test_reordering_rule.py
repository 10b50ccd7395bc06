"""The reordering property's rule for a declared loss: spurious only when neither of
RFC 9002 §6.1's thresholds allowed it by the sender's own account (its acknowledged
packets and its last logged RTT estimates), so a held datagram whose RTT grew with
the queue past 9/8 of the sender's estimate is no finding, and a sender that reads one
later acknowledgement as loss is."""

from __future__ import annotations

from harness.observe.events import Metrics, PacketAcked, PacketLost, PacketSent, Trace
from properties.test_reordering import by_neither_threshold


def _trace(*events) -> Trace:
    return Trace(stack="test", vantage="server", events=sorted(events, key=lambda e: e.t_us), source="test")


def _sent(*pns):
    return [PacketSent(t_us=1_000.0 * pn, pn=pn) for pn in pns]


def _losses(trace):
    return [e for e in trace.events if isinstance(e, PacketLost)]


def test_a_loss_past_the_senders_time_threshold_is_by_the_rule():
    # pn 2 held; pn 3 acknowledged at 23 ms; the estimate is 20 ms, so 9/8 of it is
    # 22.5 ms: pn 2 is declared at 25 ms, 23 ms after it was sent.
    trace = _trace(*_sent(1, 2, 3), Metrics(t_us=10_000.0, smoothed_rtt_us=20_000.0, latest_rtt_us=20_000.0),
                   PacketAcked(t_us=21_000.0, pn=1), PacketAcked(t_us=23_000.0, pn=3),
                   PacketLost(t_us=25_000.0, pn=2))
    assert by_neither_threshold(trace, None, _losses(trace)) == []


def test_a_loss_after_one_later_acknowledgement_and_before_the_time_threshold_is_spurious():
    trace = _trace(*_sent(1, 2, 3), Metrics(t_us=10_000.0, smoothed_rtt_us=20_000.0, latest_rtt_us=20_000.0),
                   PacketAcked(t_us=21_000.0, pn=1), PacketAcked(t_us=23_000.0, pn=3),
                   PacketLost(t_us=23_000.0, pn=2))
    (loss, why), = by_neither_threshold(trace, None, _losses(trace))
    assert loss.pn == 2 and "1 packet numbers on" in why and "22.50 ms" in why


def test_three_later_acknowledgements_allow_the_loss_at_once():
    trace = _trace(*_sent(1, 2, 3, 4, 5), Metrics(t_us=10_000.0, smoothed_rtt_us=20_000.0),
                   *[PacketAcked(t_us=20_500.0 + 100 * pn, pn=pn) for pn in (1, 3, 4, 5)],
                   PacketLost(t_us=21_100.0, pn=2))
    assert by_neither_threshold(trace, None, _losses(trace)) == []


def test_the_packet_threshold_is_a_distance_in_packet_numbers():
    # pn 2 and 3 held, 4 and 5 acknowledged: two later packets acknowledged, but the
    # largest is 3 packet numbers on (§6.1.1's largest_acked - kPacketThreshold).
    trace = _trace(*_sent(1, 2, 3, 4, 5), Metrics(t_us=10_000.0, smoothed_rtt_us=20_000.0),
                   *[PacketAcked(t_us=20_500.0 + 100 * pn, pn=pn) for pn in (1, 4, 5)],
                   PacketLost(t_us=21_100.0, pn=2))
    assert by_neither_threshold(trace, None, _losses(trace)) == []


# -- §6.1.2's floor: the time threshold is at least kGranularity ----------------------

def _floor_view(own_ack_after_us: float):
    """pn 1–4 sent 10 µs apart at 0 µs; pn 1 delayed: 2–4 acknowledged at 250 µs, pn 1
    at `own_ack_after_us`."""
    from harness.observe.quic_frames import Ack, Other
    from harness.observe.wire import Connection, Datagram, QuicPacket, WireView

    def dg(t, direction, entered, packets):
        return Datagram(int(t), t, direction, "server", entered, None, ("a", 1), ("b", 2), 0, 0, 0, packets)

    def pkt(pn, frames, eliciting):
        return QuicPacket("1rtt", "application", 100, pn, tuple(frames), eliciting)

    sends = [dg(10 * pn, "s2c", True, [pkt(pn, [Other("stream")], True)]) for pn in (1, 2, 3)]
    acks = [dg(250, "c2s", False, [pkt(7, [Ack(3, ((2, 3),), 0)], False)]),
            dg(own_ack_after_us, "c2s", False, [pkt(8, [Ack(3, ((1, 3),), 0)], False)])]
    return WireView("x", "server", 0, sends + acks, [Connection(0, ("c", 1), ("s", 2), b"", 1)], [], [])


def test_a_loss_within_the_granularity_breaks_the_floor():
    from properties.test_reordering import floor_breaches
    trace = _trace(*[PacketSent(t_us=10.0 * pn, pn=pn) for pn in (1, 2, 3)],
                   Metrics(t_us=5.0, smoothed_rtt_us=240.0, latest_rtt_us=240.0),
                   PacketAcked(t_us=250.0, pn=2), PacketAcked(t_us=250.0, pn=3),
                   PacketLost(t_us=290.0, pn=1))
    (loss, age, why), = floor_breaches(trace, None)
    assert loss.pn == 1 and age == 280.0 and "1125 µs" not in why and "1000 µs" in why
    # The same loss a millisecond on is by the rule.
    late = _trace(*[e for e in trace.events if not isinstance(e, PacketLost)], PacketLost(t_us=1_020.0, pn=1))
    assert floor_breaches(late, None) == []


def test_the_floor_is_exercised_by_an_acknowledgement_between_9_8_rtt_and_1_ms():
    from properties.test_reordering import floor_triggers
    trace = _trace(Metrics(t_us=5.0, smoothed_rtt_us=240.0, latest_rtt_us=240.0))
    assert floor_triggers(trace, _floor_view(600.0)) == [1]
    # Back within 9/8 of the RTT: a sender without the floor would not declare it either.
    assert floor_triggers(trace, _floor_view(255.0)) == []
    # Back after a millisecond: the floor does not hold it back.
    assert floor_triggers(trace, _floor_view(1_200.0)) == []


def test_the_slow_reordering_links_hold_past_an_ack_timer_and_within_the_time_threshold():
    """A hold behind k ≤ 2 datagrams on the slow links lasts k serialisations: more than
    the 1 ms a receiver (aioquic) may wait before acknowledging, so the sender sees
    the reordering; less than RTT/8, so RFC 9002's time threshold allows no loss. The
    explicit slow example is one of them, and the drawn schedules reach them too."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from harness.schedule.strategies import SLOW_REORDER_LINKS, reorder_below_threshold
    from properties.test_reordering import SLOW_HOLDS

    def check(rate_bps: int, rtt_us: int, k: int) -> None:
        held_us = k * 1252 * 8 / rate_bps * 1e6
        assert 1_000 < held_us < rtt_us / 8, (rate_bps, rtt_us, k)

    @settings(max_examples=20, database=None)
    @given(SLOW_REORDER_LINKS, st.integers(1, 2))
    def each(link, k):
        check(link.rate_bps, link.rtt_us, k)

    each()
    first = SLOW_HOLDS.phases[0].s2c
    check(first.rate_bps, 2 * first.delay_us, max(a.k for a in SLOW_HOLDS.actions))
    rates = set()

    @settings(max_examples=60, database=None)
    @given(reorder_below_threshold())
    def drawn(schedule):
        rates.add(schedule.phases[0].s2c.rate_bps)

    drawn()
    assert rates & {2_000_000, 4_000_000} and rates - {2_000_000, 4_000_000}
