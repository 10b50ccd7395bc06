"""A step of the round trip in early slow start: the data direction's delay rises by
tens of milliseconds for a few rounds, then falls back, on a link whose rate and queue
slow start has not yet reached. What HyStart++ (RFC 9406 §4.2) reads as a rising
queue (it enters conservative slow start) and then as a spurious exit (the round trip
fell below the baseline it entered on). strategies.py re-exports them."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from harness.schedule.links import BaseLink, replayable, seeds
from harness.schedule.types import Phase, Schedule

#: The queue, in BDPs: as the reordering strategies' (strategies.REORDER_QUEUE_BDP),
#: so nothing is dropped while the step and conservative slow start play out.
STEP_QUEUE_BDP = 8.0
#: Links whose BDP (250-500 kB, 200-400 datagrams) slow start reaches only rounds
#: after the step: no queue of its own raises the round trip meanwhile.
STEP_LINKS = st.builds(BaseLink, rate_bps=st.just(50_000_000), rtt_us=st.sampled_from([40_000, 80_000]))


def delay_step(base: BaseLink, seed: int, at_ms: int, step_ms: int, extra_ms: int) -> Schedule:
    """`base` with a deep queue whose data direction (server → client) is `extra_ms`
    longer from `at_ms` for `step_ms`. The emulator keeps each direction in order, so
    the fall back lets nothing overtake: the datagrams queued behind the step arrive
    together."""
    clean = base.settings(STEP_QUEUE_BDP)
    longer = replace(clean, delay_us=clean.delay_us + extra_ms * 1000)
    return Schedule(seed=seed, phases=(
        Phase(0, clean, clean),
        Phase(at_ms * 1000, clean, longer),
        Phase((at_ms + step_ms) * 1000, clean, clean),
    ))


def step_of(schedule: Schedule) -> tuple[int, int, int] | None:
    """(start, end, extra) µs of a delay_step schedule's step, or None for another
    schedule."""
    p = schedule.phases
    if len(p) != 3 or p[1].s2c.delay_us <= p[0].s2c.delay_us or p[2].s2c.delay_us != p[0].s2c.delay_us:
        return None
    return p[1].start_us, p[2].start_us, p[1].s2c.delay_us - p[0].s2c.delay_us


#: The step's length in the longer round trips: a whole round inside it, and the fall
#: within CSS_ROUNDS = 5 of conservative slow start (LONG_STEP); or the fall soon after
#: conservative slow start begins, before the noise of the round trip's own samples
#: (a sample under the baseline) ends it as spurious first (SHORT_STEP).
LONG_STEP, SHORT_STEP = (2.5, 3.5), (1.8, 2.4)


@replayable
def delay_steps(rounds: tuple[float, float] = LONG_STEP) -> st.SearchStrategy[Schedule]:
    """delay_step on STEP_LINKS: from 3-4 round trips in (a window of some 40-160
    datagrams: HyStart++ needs eight RTT samples a round), 20-40 ms longer (above
    RFC 9406's largest RttThresh, 16 ms) for `rounds` of the longer round trips;
    shrinks toward the earliest, shortest, smallest step."""
    def build(b: BaseLink, seed: int, at_rtts: float, step_rtts: float, extra_ms: int) -> Schedule:
        rtt_ms = b.rtt_us // 1000
        return delay_step(b, seed, round(at_rtts * rtt_ms), round(step_rtts * (rtt_ms + extra_ms)), extra_ms)

    return st.builds(build, STEP_LINKS, seeds, st.floats(min_value=3.0, max_value=4.0),
                     st.floats(min_value=rounds[0], max_value=rounds[1]), st.integers(min_value=20, max_value=40))
