"""The stretch of slow start the exact-growth property judges ends where HyStart++
could begin (properties/test_slow_start.standing_queue_from): a round trip in which
every datagram met 4 ms of queue, not one burst's queue. The property's planted
mutants (tests/test_new_properties.py) show it failing and stock stacks passing."""

from types import SimpleNamespace

from harness.schedule.strategies import BaseLink
from properties.test_slow_start import MIN_RTT_INCREASE_US, standing_queue_from

LINK = BaseLink(rate_bps=20_000_000, rtt_us=40_000)
PHASE = LINK.settings()
SERIALISE_US = 1252 * 8e6 / LINK.rate_bps


def _record(arr_us: float, queue_us: float) -> SimpleNamespace:
    return SimpleNamespace(arr_us=arr_us, size=1252, delay_us=PHASE.delay_us + SERIALISE_US + queue_us)


def test_a_bursts_queue_does_not_end_the_stretch():
    # Every round trip begins with a datagram that met no queue, then a burst.
    records = [_record(r * 40_000 + k * 500, 0 if k == 0 else 5_000) for r in range(10) for k in range(10)]
    assert standing_queue_from(records, PHASE, LINK.rtt_us) is None


def test_a_round_trip_of_queued_datagrams_ends_it_at_its_end():
    before = [_record(k * 1_000, 0) for k in range(80)]                      # 80 ms with no queue
    queued = [_record(80_000 + k * 1_000, MIN_RTT_INCREASE_US + 100) for k in range(80)]
    t = standing_queue_from(before + queued, PHASE, LINK.rtt_us)
    # The first arrival a whole round trip after the queue began.
    assert t == 80_000 + LINK.rtt_us


def test_no_record_with_a_delay_is_no_end():
    assert standing_queue_from([SimpleNamespace(arr_us=0.0, size=1252, delay_us=None)], PHASE, LINK.rtt_us) is None
