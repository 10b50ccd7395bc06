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
    assert loss.pn == 2 and "1 later packets acknowledged" in why and "22.50 ms" in why


def test_three_later_acknowledgements_allow_the_loss_at_once():
    trace = _trace(*_sent(1, 2, 3, 4, 5), Metrics(t_us=10_000.0, smoothed_rtt_us=20_000.0),
                   *[PacketAcked(t_us=20_500.0 + 100 * pn, pn=pn) for pn in (1, 3, 4, 5)],
                   PacketLost(t_us=21_100.0, pn=2))
    assert by_neither_threshold(trace, None, _losses(trace)) == []
