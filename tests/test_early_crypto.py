"""A server's early CRYPTO retransmissions (harness/verdict/early_crypto.py), on made-up
server-side captures: which client Initials are duplicates, which the server answered
at once, and which answers its probe timer's deferred send explains instead."""

from __future__ import annotations

from harness.observe.quic_frames import Crypto, Padding, Ping
from harness.observe.wire import Datagram, QuicPacket
from harness.verdict import early_crypto
from harness.verdict.early_crypto import Ranges

ANSWER_US = 2_000
HELLO = Crypto(0, b"h" * 300)
SERVER_HELLO = Crypto(0, b"s" * 90)
CERT = Crypto(0, b"c" * 900)


def dg(t, direction, *packets, size=1200):
    entered = direction == "s2c"  # the server's capture: it sends s2c
    return Datagram(int(t * 1000), t, direction, "server", entered, None, ("a", 1), ("b", 2), 0, size, 0,
                    list(packets))


def initial(*frames):
    return QuicPacket("initial", "initial", 1200, 0, tuple(frames), True)


def handshake(*frames):
    return QuicPacket("handshake", "handshake", 600, 0, tuple(frames), True)


def client_hello(t):
    return dg(t, "c2s", initial(HELLO, Padding(900)))


def server_flight(t):
    return dg(t, "s2c", initial(SERVER_HELLO), handshake(CERT))


class View:
    def __init__(self, *datagrams):
        self.datagrams = list(datagrams)


def test_ranges_cover_and_overlap_merged_spans():
    r = Ranges()
    r.add(100, 200)
    r.add(0, 100)
    r.add(300, 400)
    assert r.spans == [(0, 200), (300, 400)]
    assert r.covers(50, 150) and not r.covers(150, 350) and not r.covers(10, 10)
    assert r.overlaps(350, 500) and not r.overlaps(200, 300)


def test_a_duplicate_answered_at_once_within_budget_is_early():
    view = View(client_hello(0), server_flight(100), client_hello(1_000_000), server_flight(1_000_500))
    found = early_crypto.early_answers(view, ANSWER_US)
    (dup,) = found.duplicates
    # Before the duplicate: 3 × 1200 received, 1200 sent.
    assert dup.t_us == 1_000_000 and dup.budget == 2_400 and dup.answer_bytes == 1_200
    assert found.early == [dup]


def test_the_first_hello_is_no_duplicate_and_new_data_after_it_is_none_either():
    second_half = dg(10, "c2s", initial(Crypto(300, b"x" * 200)))
    view = View(client_hello(0), second_half, server_flight(100))
    assert early_crypto.early_answers(view, ANSWER_US).duplicates == []


def test_a_hello_split_in_two_and_reordered_makes_no_duplicate():
    # The second half arrives first, the first later: each is new data.
    view = View(dg(0, "c2s", initial(Crypto(300, b"x" * 200))), client_hello(400_000), server_flight(400_100))
    assert early_crypto.early_answers(view, ANSWER_US).duplicates == []


def test_a_send_later_than_the_answer_window_is_the_servers_own_timer():
    view = View(client_hello(0), server_flight(100), client_hello(1_000_000), server_flight(1_200_000))
    (dup,) = early_crypto.early_answers(view, ANSWER_US).duplicates
    assert dup.opportunity and not dup.answer and not dup.answered_early


def test_a_send_that_needed_the_duplicates_bytes_is_a_deferred_probe():
    # Three flights spent the budget of one ClientHello (3600 B): the server's probe
    # waited for the duplicate, which it neither had the chance to answer nor did.
    view = View(client_hello(0), server_flight(100), server_flight(1_000_000), server_flight(3_000_000),
                client_hello(3_500_000), server_flight(3_500_300))
    (dup,) = early_crypto.early_answers(view, ANSWER_US).duplicates
    assert dup.budget == 0 and dup.answer and not dup.opportunity and not dup.answered_early


def test_an_answer_resends_only_crypto_data_sent_before():
    # An ACK-only Initial, or a PING, in answer is no early retransmission.
    view = View(client_hello(0), server_flight(100), client_hello(1_000_000),
                dg(1_000_200, "s2c", initial(Ping())))
    (dup,) = early_crypto.early_answers(view, ANSWER_US).duplicates
    assert not dup.answer


def test_two_datagrams_of_one_probe_are_one_duplicate():
    view = View(client_hello(0), server_flight(100), client_hello(1_000_000), client_hello(1_000_050),
                server_flight(1_000_400))
    (dup,) = early_crypto.early_answers(view, ANSWER_US).duplicates
    assert dup.answered_early


def test_duplicates_after_validation_are_not_counted():
    validated = dg(500_000, "c2s", handshake(Crypto(0, b"f" * 50)))
    view = View(client_hello(0), server_flight(100), validated, client_hello(1_000_000), server_flight(1_000_100))
    found = early_crypto.early_answers(view, ANSWER_US)
    assert found.validated_us == 500_000 and found.duplicates == []


def test_every_duplicate_answered_counts_each_time():
    hellos = [1_000_000, 3_000_000, 7_000_000, 15_000_000]
    datagrams = [client_hello(0), server_flight(100)]
    for t in hellos:
        datagrams += [client_hello(t), server_flight(t + 300)]
    found = early_crypto.early_answers(View(*datagrams), ANSWER_US)
    assert [d.t_us for d in found.early] == hellos


def test_no_client_initial_gives_nothing():
    found = early_crypto.early_answers(View(server_flight(0)), ANSWER_US)
    assert found.duplicates == [] and found.validated_us == float("inf")
