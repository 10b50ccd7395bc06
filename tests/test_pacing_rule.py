"""The burst measure of properties/test_pacing.py: runs of back-to-back datagrams,
split by a gap a pacer would leave, never by the rate alone (slow start's ACK clock)."""

from __future__ import annotations

from properties.test_pacing import BACK_TO_BACK_US, bursts

MDS = 1252
#: 100 kB over 40 ms: 2.5 B/µs, a pacer at twice that leaves 250 µs per datagram.
RATE = ([0.0], [100_000 / 40_000])


def test_datagrams_at_one_instant_are_one_burst():
    sends = [(1000.0, MDS)] * 12
    assert bursts(sends, *RATE) == [(1000.0, 12, 12 * MDS)]


def test_a_paced_sender_makes_bursts_of_one():
    sends = [(1000.0 + 300 * i, MDS) for i in range(20)]
    assert [n for _, n, _ in bursts(sends, *RATE)] == [1] * 20


def test_ack_clocked_groups_are_separate_bursts():
    # Slow start's ACK clock: four datagrams per ACK, ACKs 1 ms apart. The average
    # rate is above the window's, yet no run is longer than four.
    sends = [(1000.0 + 1000 * k, MDS) for k in range(5) for _ in range(4)]
    assert [n for _, n, _ in bursts(sends, *RATE)] == [4] * 5


def test_a_gap_under_the_threshold_continues_a_burst_only_below_a_pacers_gap():
    near = BACK_TO_BACK_US / 2
    sends = [(0.0, MDS), (near, MDS), (2 * near, MDS)]
    assert bursts(sends, *RATE) == [(0.0, 3, 3 * MDS)]
    # At a rate where a pacer's gap is shorter than four such gaps, they are pacing.
    fast = ([0.0], [50.0])  # 50 B/µs: 400 Mbit/s
    assert [n for _, n, _ in bursts(sends, *fast)] == [1, 1, 1]


def test_the_rate_logged_last_before_each_send_applies():
    sends = [(0.0, MDS), (40.0, MDS), (1000.0, MDS), (1040.0, MDS)]
    times, rates = [0.0, 500.0], [2.5, 50.0]
    assert [n for _, n, _ in bursts(sends, times, rates)] == [2, 1, 1]


def test_sends_that_answer_arrivals_are_not_timed():
    """An ACK-clocked sender sends at the instants datagrams arrive (in virtual time,
    exactly; in real time within ACK_CLOCK_US); a pacer sends between them."""
    from properties.test_pacing import ACK_CLOCK_US, timed_sends

    arrivals = [1000.0 * k for k in range(1, 20)]
    clocked = [(a + 0.0, MDS) for a in arrivals for _ in range(2)]
    assert timed_sends(clocked, arrivals, 0.0, 20_000.0, ACK_CLOCK_US["virtual"]) == (38, 0)
    paced = [(1000.0 + 400 * i, MDS) for i in range(45)]
    total, timed = timed_sends(paced, arrivals, 0.0, 20_000.0, ACK_CLOCK_US["virtual"])
    assert total == 45 and timed == 45 - len([t for t, _ in paced if t % 1000 == 0])
    # Only the window (start, end] counts; an endpoint's answer 200 µs late is still one
    # in real time.
    late = [(a + 200.0, MDS) for a in arrivals]
    assert timed_sends(late, arrivals, 0.0, 5_000.0, ACK_CLOCK_US["real"]) == (4, 0)
    assert timed_sends(late, arrivals, 0.0, 5_000.0, ACK_CLOCK_US["virtual"]) == (4, 4)


def test_round_trips_after_openings_merge_and_arrivals_cover_their_reach():
    from properties.test_pacing import free_share, round_trips_after

    spans = round_trips_after([1000.0, 30_000.0, 100_000.0], lambda t: 40_000.0 if t > 500 else None)
    assert spans == [(1000.0, 70_000.0), (100_000.0, 140_000.0)]
    assert round_trips_after([100.0], lambda t: None) == []
    # Arrivals every 1000 µs, each reaching 300 µs: 30 % of the span is covered, and
    # overlapping reaches count once.
    arrivals = [float(a) for a in range(0, 20_000, 1000)]
    assert abs(free_share(arrivals, 0.0, 10_000.0, 300.0) - 0.7) < 1e-9
    assert abs(free_share(sorted(arrivals + [100.0]), 0.0, 10_000.0, 300.0) - 0.69) < 1e-9
    assert free_share([], 0.0, 10_000.0, 300.0) == 1.0
