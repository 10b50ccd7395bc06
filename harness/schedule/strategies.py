"""Hypothesis strategies that draw impairment schedules.

Every strategy returns a `harness.schedule.Schedule` (typed, JSON-serialisable) on a
clean base link, and shrinks toward "no impairment": impairment lists shrink to empty,
probabilities and extra delays toward 0, indices toward the start of the transfer.
Impairments are keyed to packet indices of the QUIC flow in the data direction
(server → client, `s2c`) wherever possible: an index replays far more faithfully in
real time than a time does, which is what lets Hypothesis shrink.

Bounds keep one example to a few seconds: transfers of about 1 MB on links of
10–50 Mbit/s and 20–80 ms.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from harness.schedule.types import (
    Action,
    GilbertElliottLoss,
    IidLoss,
    LinkSettings,
    Phase,
    Schedule,
)

# The links, seeds and replay hook (harness/schedule/links.py), named here as before.
from harness.schedule.links import (  # noqa: F401
    K_PACKET_THRESHOLD,
    MTU,
    QUIC,
    REPLAY_ENV,
    BaseLink,
    base_links,
    data_indices,
    replayable,
    replayed_plan_value,
    seeds,
)


def holds(k_max: int) -> st.SearchStrategy[Action]:
    """Hold one server→client QUIC datagram behind the next k (1 ≤ k ≤ k_max)."""
    return st.builds(
        lambda i, k: Action("s2c", i, "hold", flow=QUIC, k=k),
        data_indices, st.integers(min_value=1, max_value=k_max),
    )


#: Slow links with long round trips, for reordering a receiver cannot hide: a datagram
#: held behind one or two others arrives 2.5-10 ms after them, later than a receiver's
#: ACK timer (aioquic's is 1 ms, and it does not acknowledge a gap at once), so the
#: sender is told of the reordering; yet well within RTT/8 (12-20 ms), where RFC 9002's
#: time threshold allows no loss. At the base links' rates the held datagram usually
#: lands inside the receiver's ACK timer and a sender declaring losses early passes.
SLOW_REORDER_LINKS = st.builds(BaseLink, rate_bps=st.sampled_from([4_000_000, 2_000_000]),
                               rtt_us=st.sampled_from([100_000, 160_000]))


@replayable
def reorder_below_threshold(base: BaseLink | None = None) -> st.SearchStrategy[Schedule]:
    """Reordering RFC 9002 must tolerate: each held datagram is overtaken by fewer than
    kPacketThreshold others, within far less than kTimeThreshold (9/8 RTT) at these
    rates. Holds are spaced so two never overlap into a deeper reordering."""
    return st.builds(
        _spaced_holds,
        st.just(base) if base else st.one_of(base_links, SLOW_REORDER_LINKS), seeds,
        st.lists(holds(K_PACKET_THRESHOLD - 1), min_size=0, max_size=6, unique_by=lambda a: a.index // 10),
    )


@replayable
def reorder_beyond_threshold(base: BaseLink | None = None) -> st.SearchStrategy[Schedule]:
    """Reordering deep enough that RFC 9002 declares loss (k ≥ kPacketThreshold)."""
    deep = st.builds(
        lambda i, k: Action("s2c", i, "hold", flow=QUIC, k=k),
        data_indices, st.integers(min_value=K_PACKET_THRESHOLD, max_value=8),
    )
    return st.builds(
        _spaced_holds,
        st.just(base) if base else base_links, seeds,
        st.lists(deep, min_size=1, max_size=4, unique_by=lambda a: a.index // 20),
    )


#: Queue for the reordering strategies, in BDPs: deep enough that a 1 MB transfer's
#: slow-start overshoot does not overflow it, so the only impairment is the reordering.
REORDER_QUEUE_BDP = 8.0


def _spaced_holds(base: BaseLink, seed: int, actions: list[Action]) -> Schedule:
    return base.schedule(seed, actions=sorted(actions, key=lambda a: a.index), queue_bdp=REORDER_QUEUE_BDP)


def index_drops(max_drops: int = 6) -> st.SearchStrategy[list[Action]]:
    """Drops of chosen server→client QUIC datagrams (isolated or in a burst)."""
    single = data_indices.map(lambda i: [Action("s2c", i, "drop", flow=QUIC)])
    burst = st.builds(
        lambda i, n: [Action("s2c", i + j, "drop", flow=QUIC) for j in range(n)],
        data_indices, st.integers(min_value=2, max_value=8),
    )
    return st.lists(st.one_of(single, burst), max_size=max_drops).map(
        lambda groups: sorted({a.index: a for g in groups for a in g}.values(), key=lambda a: a.index)
    )


random_loss = st.one_of(
    st.none(),
    st.floats(min_value=0.0, max_value=0.05).map(lambda p: IidLoss(round(p, 4))),
    st.builds(
        GilbertElliottLoss,
        p_good_bad=st.floats(min_value=0.0, max_value=0.02).map(lambda p: round(p, 4)),
        p_bad_good=st.floats(min_value=0.2, max_value=1.0).map(lambda p: round(p, 3)),
        loss_good=st.just(0.0),
        loss_bad=st.floats(min_value=0.5, max_value=1.0).map(lambda p: round(p, 3)),
    ),
)


@replayable
def loss_only(base: BaseLink | None = None) -> st.SearchStrategy[Schedule]:
    """Loss in the data direction only: random (iid or bursty) and/or by index."""
    def build(b: BaseLink, seed: int, loss, drops: list[Action]) -> Schedule:
        return b.schedule(seed, s2c=b.settings(loss=loss), actions=drops)

    return st.builds(build, st.just(base) if base else base_links, seeds, random_loss, index_drops())


#: A queue no transfer of the properties fills: nothing is ever dropped.
LOSSLESS_QUEUE_BYTES = 8_000_000


@replayable
def delay_jitter(base: BaseLink | None = None, lossless: bool = False,
                 reorders: bool | None = None) -> st.SearchStrategy[Schedule]:
    """Jitter on the data direction, order-preserving or not (`reorders`: None draws
    it); with `lossless`, on a queue so deep that nothing is dropped."""
    def build(b: BaseLink, seed: int, jitter_us: int, reorders: bool) -> Schedule:
        s2c = b.settings(jitter_us=jitter_us or None, jitter_reorders=reorders or None)
        if lossless:
            deep = replace(b.settings(), queue_bytes=LOSSLESS_QUEUE_BYTES)
            return Schedule(seed=seed, phases=(Phase(0, deep, replace(s2c, queue_bytes=LOSSLESS_QUEUE_BYTES)),))
        return b.schedule(seed, s2c=s2c)

    return st.builds(
        build, st.just(base) if base else base_links, seeds,
        st.integers(min_value=0, max_value=20_000), st.booleans() if reorders is None else st.just(reorders),
    )


@replayable
def rate_changes(base: BaseLink | None = None) -> st.SearchStrategy[Schedule]:
    """The data direction's rate drops (to as little as 10%, Gordo & Tatsis) and
    possibly recovers, at times within the first seconds."""
    def build(b: BaseLink, seed: int, at_ms: int, fraction: float, back_ms: int | None) -> Schedule:
        low = replace(b.settings(), rate_bps=max(int(b.rate_bps * fraction), 500_000))
        phases = [Phase(start_us=at_ms * 1000, c2s=b.settings(), s2c=low)]
        if back_ms is not None:
            phases.append(Phase(start_us=(at_ms + back_ms) * 1000, c2s=b.settings(), s2c=b.settings()))
        return b.schedule(seed, phases=phases)

    return st.builds(
        build, st.just(base) if base else base_links, seeds,
        st.integers(min_value=100, max_value=2000),
        st.sampled_from([1.0, 0.5, 0.25, 0.1]),
        st.none() | st.integers(min_value=100, max_value=2000),
    )


@replayable
def combinations(base: BaseLink | None = None) -> st.SearchStrategy[Schedule]:
    """Loss, shallow reordering and jitter together."""
    def build(b: BaseLink, seed: int, loss, drops, holds_: list[Action], jitter_us: int) -> Schedule:
        s2c = b.settings(loss=loss, jitter_us=jitter_us or None)
        return b.schedule(seed, s2c=s2c, actions=sorted(drops + holds_, key=lambda a: a.index))

    return st.builds(
        build, st.just(base) if base else base_links, seeds, random_loss, index_drops(3),
        st.lists(holds(K_PACKET_THRESHOLD - 1), max_size=3, unique_by=lambda a: a.index // 10),
        st.integers(min_value=0, max_value=5_000),
    )


#: The fixed example every property tries first (Hypothesis' explicit phase): the
#: default base link with no impairment. A controller that misbehaves on a clean link
#: fails here at once, with the smallest possible schedule and no shrinking.
CLEAN_LINK = BaseLink().schedule(seed=0)
#: The same with the reordering strategies' deep queue (8 BDPs): a 1 MB transfer's
#: slow start does not overflow it.
CLEAN_DEEP_LINK = BaseLink().schedule(seed=0, queue_bdp=REORDER_QUEUE_BDP)
#: A clean link whose queue nothing fills.
CLEAN_LOSSLESS_LINK = Schedule.constant(0, replace(BaseLink().settings(), queue_bytes=LOSSLESS_QUEUE_BYTES))


#: Short round trips and low rates: a window of a few tens of datagrams, where CUBIC's
#: curve is flat for seconds after a cut and Reno's growth is faster (RFC 9438 §4.3).
SMALL_BDP_LINKS = st.builds(BaseLink, rate_bps=st.sampled_from([10_000_000, 5_000_000]),
                            rtt_us=st.sampled_from([10_000, 20_000]))


@replayable
def small_bdp() -> st.SearchStrategy[Schedule]:
    """No impairment on SMALL_BDP_LINKS with a one-BDP queue (ten datagrams at least):
    the queue overflows every few hundred milliseconds, so the transfer is a sawtooth
    of congestion avoidance stretches between cuts."""
    return st.builds(lambda b, seed: b.schedule(seed), SMALL_BDP_LINKS, seeds)


def queue_deepened(base: BaseLink, seed: int, deep_at_ms: int) -> Schedule:
    """`base` with a one-BDP queue that overflows in slow start, then, from `deep_at_ms`,
    a queue of REORDER_QUEUE_BDP: congestion avoidance after the cut runs for seconds
    with nothing dropped."""
    shallow, deep = base.settings(), base.settings(REORDER_QUEUE_BDP)
    return Schedule(seed=seed, phases=(Phase(0, shallow, shallow), Phase(deep_at_ms * 1000, deep, deep)))


#: The names the properties' explicit examples use, by the links they lay it on.
small_bdp_then_deep = big_bdp_then_deep = queue_deepened


@replayable
def small_bdp_deepening() -> st.SearchStrategy[Schedule]:
    """SMALL_BDP_LINKS whose shallow queue deepens 400-700 ms in, after slow start's
    overflow: the window regrows past the one it was cut from (RFC 9438 §4.3's
    cwnd_prior) and keeps growing in the Reno-friendly region."""
    return st.builds(queue_deepened, SMALL_BDP_LINKS, seeds, st.integers(min_value=400, max_value=700))


#: late_spurious_loss's first queue: six datagrams, so slow start ends, and the
#: spurious cut comes, at a window of a few datagrams.
LATE_SHALLOW_QUEUE_BYTES = 6 * MTU


def late_spurious_loss(base: BaseLink, seed: int, deep_at_ms: int, index: int, extra_ms: int) -> Schedule:
    """`base` with a one-BDP queue that slow start overflows, a queue nothing fills
    from `deep_at_ms` on, and the `index`-th datagram delayed by `extra_ms`: the
    sender declares it lost within a round trip, a spurious cut, and it arrives once
    the window has regrown past where that cut began, with nothing dropped meanwhile
    (RFC 9438 §4.9.2's late detection)."""
    shallow = replace(base.settings(), queue_bytes=LATE_SHALLOW_QUEUE_BYTES)
    deep = replace(shallow, queue_bytes=LOSSLESS_QUEUE_BYTES)
    return Schedule(seed=seed, phases=(Phase(0, shallow, shallow), Phase(deep_at_ms * 1000, deep, deep)),
                    actions=(Action("s2c", index, "delay", flow=QUIC, extra_us=extra_ms * 1000),))


#: Links of a window of ten-odd datagrams. Regrowing past a cut from W datagrams at
#: Reno-friendly speed (about half a datagram a round trip) takes about W² packets;
#: receivers discard a packet that far behind the largest they have seen (aioquic,
#: quinn and quiche keep a window of 128 packet numbers, RFC 9000 §13.2.3 allows it),
#: so only a small window can be confirmed spurious that late.
LATE_LINKS = st.builds(BaseLink, rate_bps=st.sampled_from([1_500_000, 2_000_000]),
                       rtt_us=st.sampled_from([10_000, 20_000]))


@replayable
def late_spurious_losses() -> st.SearchStrategy[Schedule]:
    """late_spurious_loss on LATE_LINKS, deepened 150-300 ms in (after slow start's
    overflows), a datagram between the 100th and the 200th delayed 350-600 ms: time
    for the window to regrow, while fewer than about 128 packets pass it (at most
    about 170 full datagrams a second leave at these rates)."""
    return st.builds(late_spurious_loss, LATE_LINKS, seeds, st.integers(min_value=150, max_value=300),
                     st.integers(min_value=100, max_value=200), st.integers(min_value=350, max_value=600))


@replayable
def big_bdp_deepening() -> st.SearchStrategy[Schedule]:
    """queue_deepened on links of hundreds of datagrams' BDP, once slow start's first
    overflow is over: the curve after the cut runs for seconds (RFC 9438 §5.1's C
    shapes it)."""
    return st.builds(queue_deepened, st.builds(BaseLink, rate_bps=st.sampled_from([30_000_000, 40_000_000]),
                                               rtt_us=st.sampled_from([60_000, 80_000])),
                     seeds, st.integers(min_value=1100, max_value=1500))


@replayable
def deep_clean() -> st.SearchStrategy[Schedule]:
    """No impairment, and a queue of REORDER_QUEUE_BDP: slow start's growing flight
    builds a queue that raises the round trip long before anything is dropped (what
    HyStart++ watches for, RFC 9406)."""
    return st.builds(lambda b, seed: b.schedule(seed, queue_bdp=REORDER_QUEUE_BDP), base_links, seeds)


@replayable
def clean(base: BaseLink | None = None) -> st.SearchStrategy[Schedule]:
    """No impairment at all: the link's rate, delay and a one-BDP queue."""
    return st.builds(lambda b, seed: b.schedule(seed), st.just(base) if base else base_links, seeds)


def ce_marked(base: BaseLink, seed: int, indices: list[int]) -> Schedule:
    """A clean link with a deep queue (a 1 MB transfer's slow start overflows none, so
    no loss stands in for the marks) on which the QUIC flow's data datagrams at
    `indices` are CE-marked. The emulator marks only an ECN-capable (ECT) datagram: a
    sender that does not use ECN passes unmarked."""
    return base.schedule(seed, actions=[Action("s2c", i, "ce", flow=QUIC) for i in sorted(indices)],
                         queue_bdp=REORDER_QUEUE_BDP)


@replayable
def ce_marks(base: BaseLink | None = None) -> st.SearchStrategy[Schedule]:
    """One to three CE marks on the data direction, at least 100 datagrams apart (a
    recovery period apart on these links); shrinks toward one mark, early."""
    return st.builds(ce_marked, st.just(base) if base else base_links, seeds,
                     st.lists(data_indices, min_size=1, max_size=3, unique_by=lambda i: i // 100))


def ce_storm(base: BaseLink, seed: int, at_ms: int, storm_ms: int) -> Schedule:
    """A clean link with a deep queue whose data direction CE-marks every ECT datagram
    (a marking threshold of 0 queued bytes) from `at_ms` for `storm_ms`: congestion
    signals that persist, and no loss."""
    clean = base.settings(REORDER_QUEUE_BDP)
    return Schedule(seed=seed, phases=(
        Phase(0, clean, clean),
        Phase(at_ms * 1000, clean, replace(clean, ecn_threshold_bytes=0)),
        Phase((at_ms + storm_ms) * 1000, clean, clean),
    ))


@replayable
def ce_storms() -> st.SearchStrategy[Schedule]:
    """Every datagram CE-marked from mid-transfer (after slow start) for 2 to 4 s."""
    return st.builds(ce_storm, st.builds(BaseLink, rate_bps=st.sampled_from([20_000_000, 10_000_000]),
                                         rtt_us=st.sampled_from([40_000, 20_000])),
                     seeds, st.integers(min_value=400, max_value=800), st.integers(min_value=2000, max_value=4000))


#: A link whose round trip is far below kGranularity (1 ms, RFC 9002 §6.1.2): 1 Gbit/s
#: (a 1500-byte datagram in 12 µs, so a small object's flight queues for well under a
#: millisecond) and 100–300 µs of propagation.
SUB_MS_LINKS = st.builds(BaseLink, rate_bps=st.just(1_000_000_000), rtt_us=st.sampled_from([100, 200, 300]))
#: Extra one-way delays that let the next datagrams of a small flight overtake one and
#: be acknowledged first, yet bring it in well before a millisecond has passed since it
#: was sent (µs): beyond 9/8 of these round trips, within the floor.
SUB_MS_EXTRA = st.integers(min_value=100, max_value=500)


@replayable
def sub_granularity_delays() -> st.SearchStrategy[Schedule]:
    """Single server→client datagrams delayed by 100–500 µs on a sub-millisecond
    link: overtaken and acknowledged after their successors, they arrive later than
    9/8 of the round trip but sooner than kGranularity after they were sent, so only
    the time threshold's floor (§6.1.2) keeps them from being declared lost."""
    delay = st.builds(lambda i, e: Action("s2c", i, "delay", flow=QUIC, extra_us=e),
                      st.integers(min_value=6, max_value=160), SUB_MS_EXTRA)
    return st.builds(lambda b, seed, acts: b.schedule(seed, actions=sorted(acts, key=lambda a: a.index)),
                     SUB_MS_LINKS, seeds, st.lists(delay, min_size=1, max_size=12, unique_by=lambda a: a.index))


# The outages (harness/schedule/outages.py) live apart to keep this module short; they
# are strategies like the rest, and properties name them here.
from harness.schedule.outages import (  # noqa: E402,F401
    BIG_BDP_DARK,
    LONG_DARK,
    ack_gap,
    ack_gaps,
    big_bdp_blackholes,
    blackholes,
    blackholes_then_longer,
    blackholes_then_rising_delay,
    dark,
    dark_then_longer,
    dark_then_rising_delay,
    early_ack_gaps,
    first_object_late,
    first_objects_late,
    long_blackholes,
    rate_halved,
    rate_halvings,
)
from harness.schedule.delay_steps import LONG_STEP, SHORT_STEP, delay_step, delay_steps, step_of  # noqa: E402,F401
