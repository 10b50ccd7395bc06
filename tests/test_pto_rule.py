"""The PTO property's rule: a declared loss with no later packet acknowledged is a
timer's (RFC 9002 §6.1 needs one for either threshold), and it breaks §6.2's MUST NOT
unless the sender had no data to send (§6.2.4's alternative to probing), which the
rule reads from the wire: an ack-eliciting send before the next acknowledgment
shows data to send."""

from __future__ import annotations

from harness.observe.events import PacketAcked, PacketLost, PacketSent, Trace
from properties.test_pto import declared_by_a_timer_with_data_to_send as judged


def _trace(*events) -> Trace:
    return Trace(stack="test", vantage="server", events=sorted(events, key=lambda e: e.t_us), source="test")


def _sent(*pns, at_ms=0.0):
    return [PacketSent(t_us=1_000.0 * (at_ms + pn), pn=pn) for pn in pns]


def test_a_loss_declared_at_a_probe_timeout_before_a_probe_is_judged():
    # pn 1 acknowledged; pn 2-3 in flight when the timer fires at 100 ms: pn 2 is
    # declared lost and pn 4 (the probe) leaves at once, nothing acknowledged since.
    trace = _trace(*_sent(1, 2, 3), PacketAcked(t_us=20_000.0, pn=1),
                   PacketLost(t_us=100_000.0, pn=2), PacketSent(t_us=100_010.0, pn=4))
    (hit,) = judged(trace, None)
    assert hit == (2, 100_000.0, 100_010.0)


def test_a_loss_after_a_later_acknowledgement_is_the_thresholds_business():
    trace = _trace(*_sent(1, 2, 3), PacketAcked(t_us=20_000.0, pn=3),
                   PacketLost(t_us=100_000.0, pn=2), PacketSent(t_us=100_010.0, pn=4))
    assert judged(trace, None) == []


def test_a_sender_with_nothing_to_send_may_mark_its_flight_lost():
    # §6.2.4's alternative: no send follows until the peer acknowledges something.
    trace = _trace(*_sent(1, 2, 3), PacketAcked(t_us=20_000.0, pn=1),
                   PacketLost(t_us=100_000.0, pn=2), PacketLost(t_us=100_000.0, pn=3),
                   PacketAcked(t_us=150_000.0, pn=3), PacketSent(t_us=150_100.0, pn=4))
    assert judged(trace, None) == []


def test_each_packet_counts_once_and_non_eliciting_sends_are_no_probe():
    trace = _trace(*_sent(1, 2), PacketAcked(t_us=20_000.0, pn=1),
                   PacketLost(t_us=100_000.0, pn=2), PacketLost(t_us=100_500.0, pn=2),
                   PacketSent(t_us=100_010.0, pn=5, ack_eliciting=False),
                   PacketSent(t_us=140_000.0, pn=6))
    assert [(pn, t) for pn, t, _ in judged(trace, None)] == [(2, 100_000.0)]
    trace = _trace(*_sent(1, 2), PacketAcked(t_us=20_000.0, pn=1), PacketLost(t_us=100_000.0, pn=2),
                   PacketSent(t_us=100_010.0, pn=5, ack_eliciting=False), PacketAcked(t_us=120_000.0, pn=5))
    assert judged(trace, None) == []


def test_handshake_spaces_are_not_judged():
    trace = _trace(PacketSent(t_us=0.0, pn=0, space="initial"), PacketLost(t_us=300_000.0, pn=0, space="initial"),
                   PacketSent(t_us=300_010.0, pn=1, space="initial"), *_sent(0, at_ms=400),
                   PacketAcked(t_us=450_000.0, pn=0))
    assert judged(trace, None) == []


class _View:
    """The two wire facts first_probe_wait reads: ack-eliciting sends on s2c."""

    def __init__(self, sends):
        from types import SimpleNamespace as NS
        self.datagrams = [NS(t_us=t, entered=True, direction="s2c", packets=[NS(ack_eliciting=True)]) for t in sends]


def test_the_first_probe_follows_the_first_long_silence_after_the_last_ack():
    from properties.test_pto import first_probe_wait
    # The last ACK at 100 ms lets out sends at 100.1 and 101 ms (paced); the probe
    # comes 60 ms after the last of them; a later probe is not the first.
    view = _View([90_000.0, 100_100.0, 101_000.0, 161_000.0, 281_000.0])
    assert first_probe_wait(view, 100_000.0, 500_000.0, 60_000.0) == (101_000.0, 161_000.0)
    # No silence of half the period before the link came back: no probe to judge.
    assert first_probe_wait(view, 100_000.0, 150_000.0, 60_000.0) is None


def _client_view(sends, arrivals=()):
    """The client's wire as handshake_probe_wait reads it: (t, space, ack_eliciting) sent
    c2s, and datagram arrivals s2c."""
    from types import SimpleNamespace as NS

    out = [NS(t_us=t, entered=True, direction="c2s", packets=[NS(space=space, ack_eliciting=elicit)])
           for t, space, elicit in sends]
    out += [NS(t_us=t, entered=False, direction="s2c", packets=[]) for t in arrivals]
    return NS(datagrams=sorted(out, key=lambda d: d.t_us))


def test_the_first_handshake_probe_is_the_clients_own_send_after_a_silence():
    from properties.test_handshake import handshake_probe_wait

    period = lambda t: 30_000.0  # noqa: E731
    # The Initial in two datagrams at 0 (one flight), the Finished at 11 ms in answer
    # to the server's flight, an ACK-only at 200 ms, the probe at 44 ms.
    view = _client_view([(0.0, "initial", True), (50.0, "initial", True), (11_000.0, "handshake", True),
                         (44_000.0, "handshake", True), (200_000.0, "handshake", False)], arrivals=[10_990.0])
    assert handshake_probe_wait(view, period) == (11_000.0, 44_000.0)
    # A resend in answer to a duplicate of the server's flight is no probe: the next send is.
    view = _client_view([(11_000.0, "handshake", True), (30_000.0, "handshake", True), (63_000.0, "handshake", True)],
                        arrivals=[10_990.0, 29_500.0])
    assert handshake_probe_wait(view, period) == (30_000.0, 63_000.0)
    # 1-RTT sends are not in the rule's spaces; no probe at all is None.
    view = _client_view([(11_000.0, "handshake", True), (50_000.0, "1rtt", True)], arrivals=[10_990.0])
    assert handshake_probe_wait(view, period) is None


def test_a_clients_first_send_of_its_request_is_no_probe():
    """A slow client's request can leave long after the server's flight: its first
    datagram of STREAM data is the application's; the same data again, or later new
    data, may be a timer's and is judged."""
    from harness.observe.quic_frames import Ack, Other, Stream
    from harness.observe.wire import Datagram, QuicPacket
    from harness.verdict.handshake_probes import first_request

    def dg(t, *packets):
        return Datagram(int(t), t, "c2s", "client", True, None, ("a", 1), ("b", 2), 0, 0, 0, list(packets))

    def pkt(space, pn, *frames):
        return QuicPacket("1rtt" if space == "application" else space, space, 100, pn, tuple(frames),
                          any(f.name not in ("ack", "padding") for f in frames))

    sends = [dg(0, pkt("handshake", 0, Other("crypto"))),
             dg(30_000, pkt("application", 0, Ack(1, ((0, 1),), 0), Stream(0, 0, 40, True))),  # the request
             dg(90_000, pkt("application", 1, Stream(0, 0, 40, True))),  # the request again: a probe's
             dg(95_000, pkt("application", 2, Stream(4, 0, 10, True)))]  # later new data: judged too
    assert first_request(sends) == 1
    # A first STREAM datagram that also carries a Handshake packet, or a PING, is no bare request.
    assert first_request([sends[0], dg(30_000, pkt("application", 0, Stream(0, 0, 40, True), Other("ping")))]) is None

