"""Strategies for the handshake: flights of either side lost or held back before
the connection has an RTT sample, on which the probe timer's start, its floor and the
anti-amplification limit are judged (properties/test_handshake.py, test_pto.py,
test_persistent_congestion.py). They share strategies.py's base links and replay."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from harness.schedule.strategies import QUIC, BaseLink, base_links, replayable, seeds
from harness.schedule.types import Action, Phase, Schedule


def handshake_held_back(base: BaseLink, seed: int, drops: int) -> Schedule:
    """A clean link that drops the client's datagrams after its first (its Initial):
    the one carrying its Finished and the next `drops - 1`, so the client's Handshake
    flight is retransmitted on its own probe timer."""
    return base.schedule(seed, actions=[Action("c2s", i, "drop") for i in range(1, drops + 1)])


#: Client datagrams after its first that handshake_delayed holds back: more than any
#: stack sends while its handshake waits (its ACKs, its Finished, its probes).
HANDSHAKE_DELAYED_DATAGRAMS = 60


def handshake_delayed(base: BaseLink, seed: int, delay_ms: int, first: int = 1) -> Schedule:
    """A clean link that delays every client datagram from its `first`-th on (by
    default all after its first, its Initial) by `delay_ms`: for that long the server
    has heard only the client's first flight, whatever the client's probe timer does
    (dropping them instead would make the wait the client's backoff: seconds on one
    stack, minutes on another), so the server's own retransmissions meet its
    anti-amplification limit."""
    return base.schedule(seed, actions=[Action("c2s", i, "delay", flow=QUIC, extra_us=delay_ms * 1_000)
                                        for i in range(first, first + HANDSHAKE_DELAYED_DATAGRAMS)])


@replayable
def handshake_delays() -> st.SearchStrategy[Schedule]:
    """The client's datagrams after its Initial held back 1.5 to 4 s, over 10–40 ms RTTs:
    long enough for a server's PTO (about 1 s before any RTT sample) to fire twice."""
    return st.builds(handshake_delayed, st.builds(BaseLink, rtt_us=st.sampled_from([10_000, 20_000, 40_000])), seeds,
                     st.integers(min_value=1_500, max_value=4_000))


@replayable
def handshake_flight_delays() -> st.SearchStrategy[Schedule]:
    """handshake_delays after the client's first one or two datagrams: a ClientHello
    too large for one datagram (a post-quantum key share) makes the client's Initial
    two, and only once the server has both does the client get Handshake keys and
    send its Finished and request into the held-back direction."""
    return st.builds(handshake_delayed, st.builds(BaseLink, rtt_us=st.sampled_from([10_000, 20_000, 40_000])), seeds,
                     st.integers(min_value=1_500, max_value=4_000), st.sampled_from([1, 2]))


def handshake_losses() -> st.SearchStrategy[Schedule]:
    """The client's Handshake flight lost several times over a short path (6–10 ms
    RTT, where max_ack_delay's 25 ms would be most of a probe timeout)."""
    return st.builds(handshake_held_back, st.builds(BaseLink, rtt_us=st.sampled_from([6_000, 10_000])), seeds,
                     st.integers(min_value=3, max_value=8))


def server_flight_lost(base: BaseLink, seed: int, drops: int) -> Schedule:
    """A clean link that delivers the server's first datagram (its Initial, which
    acknowledges the client's) and drops the next `drops`: the rest of its first flight
    and its retransmissions. The client then has nothing in flight and no Handshake
    packet acknowledged, and a server at its anti-amplification limit cannot resend."""
    return base.schedule(seed, actions=[Action("s2c", i, "drop", flow=QUIC) for i in range(1, drops + 1)])


@replayable
def server_flights_lost() -> st.SearchStrategy[Schedule]:
    """The server's first flight after its first datagram lost, and 4 to 12 datagrams
    more, over 10-80 ms RTTs."""
    return st.builds(server_flight_lost, st.builds(BaseLink, rtt_us=st.sampled_from([10_000, 40_000, 80_000])), seeds,
                     st.integers(min_value=4, max_value=12))


def server_first_flight_dropped(base: BaseLink, seed: int, server_drops: int, client_drops: int,
                                client_first: int = 1) -> Schedule:
    """A clean link that drops the server's first `server_drops` datagrams (its first
    flight, Initial and Handshake packets together) and `client_drops` of the client's
    from its `client_first`-th on (its Initial probes, after an Initial of one datagram
    or two): the server's own timer, not a client's resend, sends its next datagrams,
    with both its spaces in flight and nothing acknowledged, within what its
    anti-amplification budget has left."""
    return base.schedule(seed, actions=[Action("s2c", i, "drop", flow=QUIC) for i in range(server_drops)]
                         + [Action("c2s", i, "drop", flow=QUIC)
                            for i in range(client_first, client_first + client_drops)])


@replayable
def server_first_flights_dropped() -> st.SearchStrategy[Schedule]:
    """The server's first 1-4 datagrams and 0-3 of the client's after its first one or
    two dropped, over 10-80 ms RTTs: a first flight of one to four datagrams lost whole
    or in part, and the client's probes held off from none to three of its timer's
    expiries."""
    return st.builds(server_first_flight_dropped, st.builds(BaseLink, rtt_us=st.sampled_from([10_000, 40_000, 80_000])),
                     seeds, st.integers(min_value=1, max_value=4), st.integers(min_value=0, max_value=3),
                     st.sampled_from([1, 2]))


#: How many of the client's first datagrams client_first_flight_lost drops: a first
#: flight of one or two (a ClientHello with a post-quantum key share spans two).
FIRST_FLIGHT_DROPS = 2


def client_first_flight_lost(base: BaseLink, seed: int) -> Schedule:
    """A clean link that drops the client's first FIRST_FLIGHT_DROPS datagrams: the
    server hears nothing, so the client's first probe leaves on a PTO computed from its
    initial RTT alone (RFC 9002 §6.2.2)."""
    return base.schedule(seed, actions=[Action("c2s", i, "drop", flow=QUIC) for i in range(FIRST_FLIGHT_DROPS)])


@replayable
def client_first_flights_lost() -> st.SearchStrategy[Schedule]:
    """client_first_flight_lost on the base links (the RTT plays no part: there is no sample)."""
    return st.builds(client_first_flight_lost, base_links, seeds)


@replayable
def sub_ms_server_flights_lost() -> st.SearchStrategy[Schedule]:
    """As `server_flights_lost`, on a link of 100-200 µs round trip at 1 Gbit/s: the
    client's one RTT sample is so short that a probe timeout without its kGranularity
    floor (§6.2.1) would expire in under a millisecond, counted from the client's
    first send (four samples) as from the sample's arrival (three)."""
    links = st.builds(BaseLink, rate_bps=st.just(1_000_000_000), rtt_us=st.sampled_from([100, 150, 200]))
    return st.builds(server_flight_lost, links, seeds, st.integers(min_value=4, max_value=12))


def server_dark_from_start(base: BaseLink, seed: int, dark_ms: int) -> Schedule:
    """A clean link whose server→client direction drops everything for its first
    `dark_ms`: the server's first flight and every probe it sends in that time are lost,
    all before it can have an RTT sample (nothing of it reaches the client to be
    acknowledged). The client's own probes reach the server and renew its
    anti-amplification budget."""
    clean = base.settings()
    return Schedule(seed=seed, phases=(
        Phase(0, clean, replace(clean, blackhole=True)),
        Phase(dark_ms * 1000, clean, clean),
    ))


@replayable
def server_dark_handshakes() -> st.SearchStrategy[Schedule]:
    """server_dark_from_start over 10-80 ms RTTs for 1.2 to 3.5 s: the server's losses
    span a probe timeout of the initial RTT or two (about 1 s, then 2 s), several times
    the persistent congestion duration its first RTT sample will give."""
    return st.builds(server_dark_from_start, st.builds(BaseLink, rtt_us=st.sampled_from([10_000, 40_000, 80_000])),
                     seeds, st.integers(min_value=1_200, max_value=3_500))


def server_dark_hello_late(base: BaseLink, seed: int, dark_ms: int, hello_late_ms: int) -> Schedule:
    """server_dark_from_start, with the client's first datagram (the start of its
    ClientHello) delayed `hello_late_ms` more: the server's first flight, and so its
    probe timer, starts that much after the client's. Both sides' timers run from the
    same initial RTT, so without the delay each client probe (a retransmitted ClientHello)
    would reach the server as its own timer fires, and a server's answer to the
    duplicate could not be told from its probe (RFC 9002 §6.2.3)."""
    dark = server_dark_from_start(base, seed, dark_ms)
    return replace(dark, actions=(Action("c2s", 0, "delay", flow=QUIC, extra_us=hello_late_ms * 1_000),))


@replayable
def server_dark_duplicates() -> st.SearchStrategy[Schedule]:
    """server_dark_hello_late over 10-80 ms RTTs, dark for 15.5-17 s with the first
    datagram 250-600 ms late: a client probing from an initial RTT of 333 ms retransmits
    its ClientHello at about 1, 3, 7 and 15 s, so four duplicates reach the server
    before it can be heard, each a quarter to half a second before the server's own
    timer would fire."""
    return st.builds(server_dark_hello_late, st.builds(BaseLink, rtt_us=st.sampled_from([10_000, 40_000, 80_000])),
                     seeds, st.integers(min_value=15_500, max_value=17_000), st.integers(min_value=250, max_value=600))


def handshake_done_lost(base: BaseLink, seed: int, first: int, then: int = 0) -> Schedule:
    """A clean link that drops the receiver's `first`-th datagram and, with `then`, the
    one `then` after it (c2s, which an upload's server sends in: its HANDSHAKE_DONE,
    after its one-datagram Initial and Handshake flight, is its second, and the probe
    that resends it, after one held ACK, its fourth). Until HANDSHAKE_DONE arrives, the
    uploading client has 1-RTT keys but no confirmed handshake, and a receiver holding
    its ACKs (TransferPlan.ack_hold_ms) acknowledges the client's data with ACK Delays
    above its max_ack_delay: RFC 9002 §5.3's case for ignoring it. Losing the resend
    too keeps the client unconfirmed for several held ACKs and its own Handshake
    retransmissions, which show the wire it is (properties/test_rtt_unconfirmed.py)."""
    drops = (first, first + then) if then else (first,)
    return base.schedule(seed, actions=[Action("c2s", i, "drop", flow=QUIC) for i in drops])


@replayable
def handshake_done_losses() -> st.SearchStrategy[Schedule]:
    """handshake_done_lost over 10-80 ms RTTs, from the receiver's second or third
    datagram (a larger certificate makes its first flight two), with a second loss
    two or three datagrams later, or none."""
    return st.builds(handshake_done_lost,
                     st.builds(BaseLink, rtt_us=st.sampled_from([10_000, 20_000, 40_000, 80_000])), seeds,
                     st.sampled_from([1, 2]), st.sampled_from([2, 3, 0]))
