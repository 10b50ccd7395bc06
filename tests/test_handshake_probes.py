"""Probes told from the wire during the handshake (harness/verdict/handshake_probes.py):
which datagrams an endpoint's own timer sent, the datagrams of one expiry, and the
packet number spaces it had in flight then."""

from __future__ import annotations

from harness.observe.quic_frames import Ack, Other, Stream
from harness.observe.wire import Datagram, QuicPacket
from harness.verdict.handshake_probes import client_probes, server_probes


def dg(t, direction, *packets, side="client"):
    sent = (direction == "c2s") == (side == "client")
    return Datagram(int(t), t, direction, side, sent, None, ("a", 1), ("b", 2), 0, 0, 1200, list(packets))


def pkt(space, pn, *frames):
    return QuicPacket("1rtt" if space == "application" else space, space, 100, pn, tuple(frames),
                      any(f.name not in ("ack", "padding") for f in frames))


def test_a_client_probe_knows_what_it_left_in_flight():
    """client_probes: a probe's spaces in flight are those with ack-eliciting packets no
    ACK reaching the client had acknowledged; the Initial space is left once the client
    sends a Handshake packet; an arrival or a send within 20 ms makes a datagram no
    probe; the datagrams within 5 ms after are the same expiry's."""
    class View:
        datagrams = [
            dg(0, "c2s", pkt("initial", 0, Other("crypto"))),
            dg(10_000, "s2c", pkt("initial", 0, Ack(0, ((0, 0),), 0), Other("crypto")),
               pkt("handshake", 0, Other("crypto"))),
            dg(10_500, "c2s", pkt("handshake", 0, Other("crypto"))),  # the Finished: Initial keys dropped
            dg(10_600, "c2s", pkt("application", 0, Stream(0, 0, 40, True))),  # the request
            dg(50_000, "c2s", pkt("handshake", 1, Other("crypto"))),  # a probe: Handshake only
            dg(52_000, "c2s", pkt("handshake", 2, Other("ping"))),  # the same expiry's second datagram
            dg(60_000, "s2c", pkt("handshake", 1, Ack(2, ((0, 2),), 0))),  # the Handshake flight acknowledged
            dg(130_000, "c2s", pkt("application", 1, Stream(0, 0, 40, True))),  # a probe: 1-RTT in flight only
        ]

    found = client_probes(View())
    assert found.keys_at == 10_000 and found.confirmed_at == float("inf")
    first, second = found.probes
    assert first.first.t_us == 50_000 and [d.t_us for d in first.burst] == [50_000, 52_000]
    assert first.in_flight == {"handshake", "application"}
    assert first.carries("handshake") and not first.carries("application")
    assert second.in_flight == {"application"} and second.carries("application")


def test_a_server_probe_leaves_the_initial_space_when_a_client_handshake_packet_arrives():
    """server_probes: the server's first flight dropped, its own timer resends both
    spaces (judged in flight: initial and handshake); once a client Handshake packet
    reaches it the Initial space is gone; the probe window ends at its HANDSHAKE_DONE."""
    class View:
        datagrams = [
            dg(0, "c2s", pkt("initial", 0, Other("crypto")), side="server"),
            dg(100, "s2c", pkt("initial", 0, Ack(0, ((0, 0),), 0), Other("crypto")),
               pkt("handshake", 0, Other("crypto")), side="server"),
            dg(200_000, "s2c", pkt("handshake", 1, Other("crypto")), side="server"),  # Handshake alone
            dg(260_000, "c2s", pkt("handshake", 0, Ack(0, ((0, 0),), 0)), side="server"),  # drops Initial
            dg(400_000, "s2c", pkt("handshake", 2, Other("ping")), side="server"),  # one space in flight
            dg(450_000, "c2s", pkt("handshake", 1, Other("crypto")), side="server"),  # the Finished
            dg(450_100, "s2c", pkt("application", 0, Other("handshake_done")), side="server"),
            dg(600_000, "s2c", pkt("application", 1, Stream(0, 0, 40, True)), side="server"),  # after confirmation
        ]

    found = server_probes(View())
    assert found.keys_at == 100 and found.confirmed_at == 450_100
    first, second = found.probes
    assert first.in_flight == {"initial", "handshake"} and not first.carries("initial")
    assert second.first.t_us == 400_000 and second.in_flight == {"handshake"}


def _server_view(*sends_and_arrivals):
    class View:
        datagrams = [dg(t, direction, *packets, side="server") for t, direction, *packets in sends_and_arrivals]
    return View()


FIRST_FLIGHT = [(0, "c2s", pkt("initial", 0, Other("crypto"))),
                (100, "s2c", pkt("initial", 0, Ack(0, ((0, 0),), 0), Other("crypto")),
                 pkt("handshake", 0, Other("crypto")))]


def test_after_a_probe_of_one_space_the_other_spaces_timer_is_the_earlier():
    """earlier_timer_misses: a server that probes its Initial space twice while its
    Handshake flight, sent longer ago, waits misses the earlier timer at the second
    probe; one that alternates does not; a first probe after a coalesced flight is not
    judged (both timers are one)."""
    from harness.verdict.handshake_probes import earlier_timer_misses

    stuck = server_probes(_server_view(*FIRST_FLIGHT, (1_000_000, "s2c", pkt("initial", 1, Other("crypto"))),
                                       (3_000_000, "s2c", pkt("initial", 2, Other("crypto")))))
    judged, bad = earlier_timer_misses(stuck.probes, ("initial", "handshake"), 5_000)
    assert [p.first.t_us for p in judged] == [3_000_000]
    assert [(p.first.t_us, space) for p, space in bad] == [(3_000_000, "handshake")]
    alternating = server_probes(_server_view(*FIRST_FLIGHT, (1_000_000, "s2c", pkt("initial", 1, Other("crypto"))),
                                             (2_000_000, "s2c", pkt("handshake", 1, Other("crypto")))))
    judged, bad = earlier_timer_misses(alternating.probes, ("initial", "handshake"), 5_000)
    assert len(judged) == 1 and bad == []


def test_a_send_that_loss_detection_may_explain_is_no_probe():
    """A packet left unacknowledged below its space's largest acknowledged may have
    been declared lost: a send after that ACK, however long after (a pacer's), is not
    judged as a timer's; an answer at the very µs of an arrival is not either."""
    flight = [*FIRST_FLIGHT, (200_000, "s2c", pkt("handshake", 1, Other("crypto")))]
    gap = server_probes(_server_view(*flight, (260_000, "c2s", pkt("handshake", 0, Ack(1, ((1, 1),), 0))),
                                     (300_000, "s2c", pkt("handshake", 2, Other("crypto")))))
    assert [p.first.t_us for p in gap.probes] == [200_000]  # 300 ms: handshake pn 0 lies below the largest, 1
    answer = server_probes(_server_view(*flight, (260_000, "c2s", pkt("handshake", 0, Ack(0, ((0, 0),), 0))),
                                        (260_000, "s2c", pkt("handshake", 2, Other("crypto")))))
    assert [p.first.t_us for p in answer.probes] == [200_000]
