"""The sender's acknowledgements of its peer's ack-eliciting packets (harness/verdict/
ack_timing.py), on made-up server-side captures: what is owed, when it was answered,
and whether a response was under way when it fell due."""

from __future__ import annotations

from harness.observe.quic_frames import Ack, Other, Ping, Stream
from harness.observe.wire import Datagram, QuicPacket
from harness.verdict import ack_timing, analysis

SLACK_US = 2_000
BOUND_US = 25_000 + SLACK_US  # the default max_ack_delay (no transport parameter seen)


def dg(t, direction, *packets):
    entered = direction == "s2c"  # the server's capture: it sends s2c
    return Datagram(int(t * 1000), t, direction, "server", entered, None, ("a", 1), ("b", 2), 0, 1200, 0,
                    list(packets))


def pkt(pn, *frames):
    return QuicPacket("1rtt", "application", 100, pn, tuple(frames),
                      any(f.name not in ("ack", "padding") for f in frames))


def ack(*ranges):
    return Ack(max(h for _, h in ranges), tuple(ranges), 0)


class View:
    def __init__(self, *datagrams):
        self.datagrams = list(datagrams)
        self.connections = []


DONE = dg(0, "s2c", pkt(0, Other("handshake_done")))


def data(t, pn, offset, *extra, fin=False):
    return dg(t, "s2c", pkt(pn, *extra, Stream(0, offset, 1000, fin)))


def test_an_acknowledgement_in_time_during_a_response_is_judged_and_on_time():
    view = View(DONE, data(1_000, 1, 0), dg(10_000, "c2s", pkt(5, Ping())),
                data(20_000, 2, 1000, ack((0, 5))), data(60_000, 3, 2000, fin=True))
    (owed,) = ack_timing.owed_acks(view, SLACK_US)
    assert (owed.pn, owed.arrived_us, owed.acked_us, owed.deadline_us) == (5, 10_000, 20_000, 10_000 + BOUND_US)
    assert owed.sending and not owed.late and owed.delay_us == 10_000


def test_an_acknowledgement_held_for_the_next_data_packet_is_late():
    # The ACK rides on the data packet 45 ms after the PING: past 25 + 2 ms.
    view = View(DONE, data(1_000, 1, 0), dg(10_000, "c2s", pkt(5, Ping())),
                data(55_000, 2, 1000, ack((0, 5))), data(90_000, 3, 2000, fin=True))
    (owed,) = ack_timing.owed_acks(view, SLACK_US)
    assert owed.sending and owed.late and owed.delay_us == 45_000


def test_an_acknowledgement_never_sent_is_late_once_the_sender_goes_on():
    view = View(DONE, data(1_000, 1, 0), dg(10_000, "c2s", pkt(5, Ping())), data(80_000, 2, 1000, fin=True))
    (owed,) = ack_timing.owed_acks(view, SLACK_US)
    assert owed.late and owed.acked_us is None and owed.delay_us is None


def test_a_packet_due_after_the_senders_last_datagram_is_not_owed():
    view = View(DONE, data(1_000, 1, 0, fin=True), dg(10_000, "c2s", pkt(5, Ping())), data(20_000, 2, 1000))
    assert ack_timing.owed_acks(view, SLACK_US) == []


def test_acks_only_and_packets_before_confirmation_owe_nothing():
    early = dg(-5_000, "c2s", pkt(1, Ping()))  # before HANDSHAKE_DONE: keys may be missing
    view = View(early, DONE, data(1_000, 1, 0), dg(10_000, "c2s", pkt(5, ack((0, 1)))),
                data(60_000, 2, 1000, fin=True))
    assert ack_timing.owed_acks(view, SLACK_US) == []


def test_a_packet_due_between_responses_is_owed_but_not_during_one():
    # The first response ended (FIN) before the PING's deadline; the next starts later.
    view = View(DONE, data(1_000, 1, 0, fin=True), dg(10_000, "c2s", pkt(5, Ping())),
                dg(12_000, "s2c", pkt(2, ack((0, 5)))),
                dg(100_000, "s2c", pkt(3, Stream(4, 0, 1000, False))),
                dg(150_000, "s2c", pkt(4, Stream(4, 1000, 1000, True))))
    (owed,) = ack_timing.owed_acks(view, SLACK_US)
    assert not owed.sending and not owed.late


def test_streams_that_never_end_are_no_response_under_way():
    # HTTP/3's control stream: data, never a FIN.
    view = View(dg(0, "s2c", pkt(1, Stream(3, 0, 20, False))), dg(500, "s2c", pkt(2, Stream(3, 20, 5, False))))
    assert ack_timing.sending_intervals(view) == []


def test_a_client_sending_an_upload_is_confirmed_by_the_handshake_done_it_receives():
    view = View(dg(0, "c2s", pkt(0, Other("handshake_done"))), data(1_000, 1, 0),
                dg(10_000, "c2s", pkt(5, Ping())), data(50_000, 2, 1000, ack((5, 5))),
                data(90_000, 3, 2000, fin=True))
    assert analysis.sender_confirmed_us(view) == 0
    owed = {o.pn: o for o in ack_timing.owed_acks(view, SLACK_US)}
    assert owed.keys() == {0, 5}  # the HANDSHAKE_DONE's packet is ack-eliciting too
    assert owed[5].late and owed[5].delay_us == 40_000
