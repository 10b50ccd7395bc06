"""Outages: the data or the acknowledgement direction dark for a while (tail loss,
PTOs, persistent congestion, compressed acknowledgements). Strategies like those of
strategies.py, on the same base links and replay (links.py); strategies.py re-exports them."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from harness.schedule.links import BaseLink, base_links, replayable, seeds
from harness.schedule.types import Phase, Schedule


@replayable
def blackholes(base: BaseLink | None = None) -> st.SearchStrategy[Schedule]:
    """The data direction goes dark for a while (tail loss, PTOs, persistent
    congestion when long enough), then comes back."""
    def build(b: BaseLink, seed: int, at_ms: int, dark_ms: int) -> Schedule:
        dark = replace(b.settings(), blackhole=True)
        phases = [
            Phase(start_us=at_ms * 1000, c2s=b.settings(), s2c=dark),
            Phase(start_us=(at_ms + dark_ms) * 1000, c2s=b.settings(), s2c=b.settings()),
        ]
        return b.schedule(seed, phases=phases)

    return st.builds(
        build, st.just(base) if base else base_links, seeds,
        st.integers(min_value=100, max_value=1500), st.integers(min_value=10, max_value=3000),
    )


def dark(base: BaseLink, seed: int, at_ms: int, dark_ms: int) -> Schedule:
    """A clean link whose data direction is a blackhole from `at_ms` for `dark_ms`."""
    clean = base.settings()
    return Schedule(seed=seed, phases=(
        Phase(0, clean, clean),
        Phase(at_ms * 1000, clean, replace(clean, blackhole=True)),
        Phase((at_ms + dark_ms) * 1000, clean, clean),
    ))


#: long_blackholes' draws: links, seeds, when the data direction goes dark (ms, after
#: slow start of a few MB) and for how long (ms).
LONG_DARK = (st.builds(BaseLink, rate_bps=st.sampled_from([20_000_000, 10_000_000]),
                       rtt_us=st.sampled_from([40_000, 20_000])),
             seeds, st.integers(min_value=500, max_value=800), st.integers(min_value=1000, max_value=3000))


@replayable
def long_blackholes() -> st.SearchStrategy[Schedule]:
    """The data direction goes dark mid-transfer of a few MB (after slow start), for
    1 to 3 s: long enough for persistent congestion and several PTOs in a row."""
    return st.builds(dark, *LONG_DARK)


#: big_bdp_blackholes' draws: links of 190-500 datagrams' BDP, the dark once the first
#: slow start is over (ms), and long enough for persistent congestion (ms).
BIG_BDP_DARK = (st.builds(BaseLink, rate_bps=st.sampled_from([30_000_000, 40_000_000]),
                          rtt_us=st.sampled_from([80_000, 100_000])),
                seeds, st.integers(min_value=1000, max_value=1600), st.integers(min_value=1000, max_value=2000))


@replayable
def big_bdp_blackholes() -> st.SearchStrategy[Schedule]:
    """long_blackholes on links with a window of hundreds of datagrams: what the
    sender does with the window it had before the outage shows in how fast it grows
    back (RFC 9438 §4.8)."""
    return st.builds(dark, *BIG_BDP_DARK)


def dark_then_longer(base: BaseLink, seed: int, at_ms: int, dark_ms: int, extra_ms: int) -> Schedule:
    """`dark`, and when the data direction comes back the path is `extra_ms` longer
    (half each way): a route change behind the outage, so every RTT sample after it
    exceeds every one before."""
    outage = dark(base, seed, at_ms, dark_ms)
    light = outage.phases[2]
    longer = replace(light.s2c, delay_us=light.s2c.delay_us + extra_ms * 500)
    return replace(outage, phases=(*outage.phases[:2], replace(light, c2s=longer, s2c=longer)))


@replayable
def blackholes_then_longer() -> st.SearchStrategy[Schedule]:
    """long_blackholes' outages (persistent congestion) followed by a path 20 to 60 ms
    longer."""
    return st.builds(dark_then_longer, *LONG_DARK, st.integers(min_value=20, max_value=60))


#: dark_then_rising_delay's ramp, a step every RAMP_STEP_MS: HyStart++ reads a full
#: queue in a round whose minimum RTT exceeds the last round's by RttThresh, an eighth
#: of it between 4 and 16 ms (RFC 9406 §4.2). The round trip grows by RAMP_SLOPE (ms
#: a ms, so each round by that share of itself) until it reaches RAMP_KNEE_US, then
#: by RAMP_CAP_US a round trip: over the threshold at every round trip, with margin,
#: while the path lengthens no faster than it must.
RAMP_STEP_MS, RAMP_SLOPE, RAMP_KNEE_US, RAMP_CAP_US = 20, 0.15, 128_000, 20_000


def dark_then_rising_delay(base: BaseLink, seed: int, at_ms: int, dark_ms: int, ramp_ms: int) -> Schedule:
    """`dark` (persistent congestion), and from the end of the outage for `ramp_ms` a
    path growing longer round after round: the slow start after the collapse runs
    while the round trip rises, which HyStart++ would read as a full queue (RFC 9406
    §4.3 keeps it to the first slow start)."""
    outage = dark(base, seed, at_ms, dark_ms)
    light = outage.phases[2]
    ramp, rtt_us = [], float(base.rtt_us)
    for k in range(1, ramp_ms // RAMP_STEP_MS + 1):
        slope = RAMP_SLOPE if rtt_us < RAMP_KNEE_US else RAMP_CAP_US / rtt_us
        rtt_us += slope * RAMP_STEP_MS * 1000
        longer = replace(light.s2c, delay_us=int(rtt_us) // 2)
        ramp.append(Phase(light.start_us + k * RAMP_STEP_MS * 1000, longer, longer))
    return replace(outage, phases=(*outage.phases, *ramp))


@replayable
def blackholes_then_rising_delay() -> st.SearchStrategy[Schedule]:
    """big_bdp_blackholes' outages (persistent congestion on a window of hundreds of
    datagrams, so the ssthresh kept is far above the few tens of datagrams at which a
    delay-based exit reacts) followed by a round trip that rises every round for 4-5 s
    (dark_then_rising_delay): the slow start after the collapse (wherever PTO back-off
    puts the first probe that gets through, up to seconds after the outage) sees the
    round trip rise in every round."""
    return st.builds(dark_then_rising_delay, *BIG_BDP_DARK, st.integers(min_value=4000, max_value=5000))


def first_object_late(base: BaseLink, seed: int, late_ms: int, dark_ms: int) -> Schedule:
    """What the sender sends from one RTT to two in (the first object's data, after its
    handshake flight) reaches the client `late_ms` late, and the data direction is
    dark from two RTTs in until `dark_ms` after those datagrams arrive: the sender's
    probe timeout retransmits the data into the dark, then the late originals are
    acknowledged, so its probes are in flight with nothing left to send (RFC 9002
    §6.2.4's own example). The path comes back once the delayed datagrams are in, so
    none overtakes them."""
    clean = base.settings()
    late = replace(clean, delay_us=clean.delay_us + late_ms * 1000)
    return Schedule(seed=seed, phases=(
        Phase(0, clean, clean),
        Phase(base.rtt_us, clean, late),
        Phase(2 * base.rtt_us, clean, replace(clean, blackhole=True)),
        Phase(2 * base.rtt_us + (late_ms + dark_ms) * 1000, clean, clean),
    ))


@replayable
def first_objects_late() -> st.SearchStrategy[Schedule]:
    """first_object_late on the base links, the first object's datagrams 200-600 ms
    late (longer than a first probe timeout), dark for 0.5-1.5 s after they arrive:
    several probe timeouts with nothing to send."""
    return st.builds(first_object_late, base_links, seeds, st.integers(min_value=200, max_value=600),
                     st.integers(min_value=500, max_value=1500))


def ack_gap(base: BaseLink, seed: int, at_ms: int, gap_ms: int) -> Schedule:
    """A clean link whose acknowledgement direction (client → server) is dark from
    `at_ms` for `gap_ms`: the first ACK after the gap acknowledges everything the
    client received meanwhile, which opens the sender's window at once."""
    clean = base.settings()
    return Schedule(seed=seed, phases=(
        Phase(0, clean, clean),
        Phase(at_ms * 1000, replace(clean, blackhole=True), clean),
        Phase((at_ms + gap_ms) * 1000, clean, clean),
    ))


@replayable
def ack_gaps() -> st.SearchStrategy[Schedule]:
    """Compressed acknowledgements: the ACK direction goes dark mid-transfer for a
    tenth of an RTT to four RTTs, after slow start has grown the window past the
    initial one. What a sender without pacing then sends is one burst."""
    return st.builds(
        lambda b, seed, at_ms, rtts: ack_gap(b, seed, at_ms, max(1, int(rtts * b.rtt_us / 1000))),
        base_links, seeds, st.integers(min_value=200, max_value=600),
        st.sampled_from([1.0, 0.5, 2.0, 4.0, 0.1]),
    )


@replayable
def early_ack_gaps() -> st.SearchStrategy[Schedule]:
    """ack_gap in the first round trips of slow start: the ACK direction dark from 60
    to 160 ms for a quarter of an RTT to one RTT, so that the first ACK after it
    acknowledges many datagrams at once (what one ACK may add in slow start, RFC
    9406's L). Shrinks toward the earliest, shortest gap."""
    return st.builds(
        lambda b, seed, at_ms, rtts: ack_gap(b, seed, at_ms, max(1, int(rtts * b.rtt_us / 1000))),
        base_links, seeds, st.integers(min_value=60, max_value=160), st.sampled_from([0.25, 0.5, 1.0]),
    )


def rate_halved(base: BaseLink, seed: int, at_ms: int) -> Schedule:
    """A clean link with a one-BDP queue whose data direction's rate halves at `at_ms`
    (a second flow arriving, from this flow's side): the next overflow comes at a
    smaller window than the last."""
    clean = base.settings()
    return Schedule(seed=seed, phases=(
        Phase(0, clean, clean),
        Phase(at_ms * 1000, clean, replace(clean, rate_bps=base.rate_bps // 2)),
    ))


@replayable
def rate_halvings() -> st.SearchStrategy[Schedule]:
    """rate_halved on links of hundreds of datagrams' BDP, after slow start's first
    overflow: two reductions in a row, the second from a window well below the first
    (RFC 9438 §4.7's fast convergence lowers the plateau the curve heads for)."""
    return st.builds(rate_halved, st.builds(BaseLink, rate_bps=st.sampled_from([30_000_000, 40_000_000]),
                                            rtt_us=st.sampled_from([60_000, 80_000])),
                     seeds, st.integers(min_value=900, max_value=1400))
