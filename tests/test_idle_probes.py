"""Probes sent with nothing to send (harness/verdict/idle_probes.py): the sender's ledger
of what it sent and what the acknowledgements reaching it cover, and the bursts of
ack-eliciting datagrams it sends once everything is covered."""

from __future__ import annotations

from harness.observe.quic_frames import Ack, NewConnectionId, Other, Stream
from harness.observe.wire import Datagram, QuicPacket
from harness.verdict.idle_probes import idle_probe_bursts

GAP_US = 30_000


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


DATA = Stream(0, 0, 1000, True)


def test_the_rfc_example_gives_a_probe_per_expiry():
    """RFC 9002 §6.2.4's example: data sent, retransmitted on a timer, the original
    acknowledged; the retransmission still in flight, the sender has nothing to send.
    Each later expiry is a burst: one datagram passes, two (sent together) fail."""
    v = View(dg(0, "s2c", pkt(1, Other("handshake_done"), DATA)),
             dg(150_000, "s2c", pkt(2, Other("handshake_done"), DATA)),  # the timer's retransmission
             dg(300_000, "c2s", pkt(7, ack((1, 1)))),  # the original acknowledged: nothing owed
             dg(450_000, "s2c", pkt(3, Other("ping"))),
             dg(900_000, "s2c", pkt(4, Other("ping"))),
             dg(900_000, "s2c", pkt(5, Other("ping"))))
    bursts = idle_probe_bursts(v, 0, GAP_US)
    assert [(b.first_us, b.datagrams) for b in bursts] == [(450_000, 1), (900_000, 2)]
    assert "ping" in bursts[1].describe()


def test_a_resend_of_acknowledged_frames_is_no_data():
    """Frames some acknowledged packet carried (the same HANDSHAKE_DONE, the same
    NEW_CONNECTION_ID, the same bytes) are nothing to send, resent or not."""
    ncid = NewConnectionId(1, 0, b"c")
    v = View(dg(0, "s2c", pkt(1, ncid, DATA)),
             dg(10_000, "c2s", pkt(7, ack((1, 1)))),
             dg(200_000, "s2c", pkt(2, ncid, Stream(0, 0, 500, False))),
             dg(200_000, "s2c", pkt(3, Other("ping"))))
    bursts = idle_probe_bursts(v, 0, GAP_US)
    assert [(b.first_us, b.datagrams) for b in bursts] == [(200_000, 2)]


def test_data_owed_or_new_makes_no_probe():
    """While a byte, a FIN or a repeated frame is unacknowledged the sender has data to
    send; a datagram carrying something never sent (new bytes, a new sequence number,
    a new limit) answers a new need; a send upon an arrival answers it."""
    v = View(dg(0, "s2c", pkt(1, DATA)),
             dg(150_000, "s2c", pkt(2, Other("ping"))),  # the data unacknowledged: owed
             dg(300_000, "c2s", pkt(7, ack((1, 2)))),
             dg(300_500, "s2c", pkt(3, Other("ping"))),  # upon the arrival: an answer
             dg(400_000, "s2c", pkt(4, Stream(4, 0, 100, True))),  # new bytes
             dg(500_000, "c2s", pkt(8, ack((1, 4)))),
             dg(600_000, "s2c", pkt(5, NewConnectionId(2, 0, b"d"))),  # a new sequence number
             dg(700_000, "c2s", pkt(9, ack((1, 5)))),
             dg(800_000, "s2c", pkt(6, Other("max_streams", (10,)))),  # a new limit
             dg(900_000, "c2s", pkt(10, ack((1, 6)))),
             dg(1_000_000, "s2c", pkt(11, Other("max_streams", (10,)))))  # that limit again: a probe
    bursts = idle_probe_bursts(v, 0, GAP_US)
    assert [(b.first_us, b.datagrams) for b in bursts] == [(1_000_000, 1)]


def test_a_burst_follows_a_silence_and_ends_at_news():
    """A burst begins at least the gap after the sender's last ack-eliciting send (a
    send sooner is paced, not a timer's) and takes the datagrams less than half the
    gap apart after it; an acknowledgement with news between ends it."""
    v = View(dg(0, "s2c", pkt(1, DATA)),
             dg(10_000, "c2s", pkt(7, ack((1, 1)))),
             dg(20_000, "s2c", pkt(2, Stream(0, 0, 500, False))),  # 20 ms after the last send: paced
             dg(100_000, "s2c", pkt(3, Other("ping"))),
             dg(110_000, "s2c", pkt(4, Other("ping"))),  # the same expiry
             dg(200_000, "s2c", pkt(5, Other("ping"))),
             dg(205_000, "c2s", pkt(8, ack((1, 5)))),
             dg(210_000, "s2c", pkt(6, Other("ping"))),  # after news: no longer that burst, and too soon
             dg(300_000, "s2c", pkt(9, Other("ping"))))
    assert [(b.first_us, b.datagrams) for b in idle_probe_bursts(v, 0, GAP_US)] == [
        (100_000, 2), (200_000, 1), (300_000, 1)]
