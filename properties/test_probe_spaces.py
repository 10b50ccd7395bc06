"""Which packet number spaces a probe covers during the handshake (RFC 9002 §6.2.4):
"In addition to sending data in the packet number space for which the timer expired,
the sender SHOULD send ack-eliciting packets from other packet number spaces with
in-flight data, coalescing packets if possible. This is particularly valuable when the
server has both Initial and Handshake data in flight or when the client has both
Handshake and Application Data in flight because the peer might only have receive keys
for one of the two packet number spaces."

Both cases the text names are judged, each on its endpoint's own capture and on the two
spaces it names: the client's Finished and request held back (Handshake and 1-RTT),
and the server's first flight dropped (Initial and Handshake). A probe is told
from the wire (harness/verdict/handshake_probes.py): a send of the endpoint's own after
20 ms of silence both ways, with the datagrams the same expiry sends (5 ms).
"""

from __future__ import annotations

from hypothesis import example, given

from harness.schedule import TransferPlan, handshake
from harness.schedule.strategies import BaseLink
from harness.verdict import outcomes
from harness.verdict.deviation import check
from harness.verdict.handshake_probes import (
    CLIENT_PROBE_BURST_US,
    HandshakeProbes,
    client_probes,
    earlier_timer_misses,
    server_probes,
)

#: A small object: the properties are over once the handshake is.
PLAN = TransferPlan(sizes=(50_000,))


def judge(target, who: str, found: HandshakeProbes, spaces: tuple[str, str]) -> None:
    """Each probe with ack-eliciting packets unacknowledged in both `spaces` carries an
    ack-eliciting packet of each (in its expiry's datagrams)."""
    judged = [probe for probe in found.probes if set(spaces) <= probe.in_flight]
    if not judged:
        outcomes.not_exercised(f"none of the {who}'s {len(found.probes)} probes before the handshake was confirmed "
                               f"left with ack-eliciting packets in flight in both the {' and the '.join(spaces)} "
                               f"spaces")
    bad = [(probe, sorted(s for s in spaces if not probe.carries(s))) for probe in judged]
    bad = [(probe, missing) for probe, missing in bad if missing]
    first = bad[0] if bad else None
    check(not bad, "probe-skips-a-space-in-flight", lambda: (
        f"{target.id}: {len(bad)} of the {who}'s {len(judged)} probes with packets in flight in the {spaces[0]} and "
        f"{spaces[1]} spaces carry no ack-eliciting packet of one of them; first at t={first[0].first.t_us / 1e6:.4f} s, in flight "
        f"{sorted(first[0].in_flight)}, none of {first[1]} in its {len(first[0].burst)} datagram(s): "
        f"{[[(p.space, p.ack_eliciting) for p in d.packets] for d in first[0].burst]}"
    ), bad=len(bad), judged=len(judged),
        # Which of the two spaces the probes leave out, counted over the probes.
        **{f"missing_{space}": sum(1 for _, m in bad if space in m) for space in spaces})


@example(schedule=handshake.handshake_delayed(BaseLink(rtt_us=10_000), 0, 3_000))
@example(schedule=handshake.handshake_delayed(BaseLink(rtt_us=10_000), 0, 3_000, first=2))
@given(schedule=handshake.handshake_flight_delays())
def test_client_probes_cover_every_space_in_flight(longlook, target, schedule):
    """RFC 9002 §6.2.4: "In addition to sending data in the packet number space for
    which the timer expired, the sender SHOULD send ack-eliciting packets from other
    packet number spaces with in-flight data, coalescing packets if possible." The
    client's datagrams after its Initial are held back, so its Finished (Handshake)
    and its request (1-RTT) are both in flight, unacknowledged, when its handshake
    timer fires (from its third datagram on, where its Initial takes two). Read off
    the client side's capture: each probe of the client's own before the handshake is
    confirmed (as the client-probe property tells them) with ack-eliciting packets that
    no ACK reaching it had acknowledged in both the Handshake and the 1-RTT space
    carries, with the datagrams the same expiry sent, an ack-eliciting packet of each. Judged on the target's client (in a download without a peer it is
    the target's stack). Trigger: a probe with packets in flight in both spaces."""
    outcomes.require_own_client(target)
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        judge(target, "client", client_probes(obs.client_wire), ("handshake", "application"))


@example(schedule=handshake.server_first_flight_dropped(BaseLink(rtt_us=40_000), 0, 2, 2))
@example(schedule=handshake.server_first_flight_dropped(BaseLink(rtt_us=40_000), 0, 2, 2, client_first=2))
@example(schedule=handshake.server_first_flight_dropped(BaseLink(rtt_us=40_000), 0, 3, 2, client_first=2))
@given(schedule=handshake.server_first_flights_dropped())
def test_server_probes_cover_every_space_in_flight(longlook, target, schedule):
    """RFC 9002 §6.2.4, the server's case: its first flight (Initial and Handshake
    packets, often coalesced) is dropped, and the client's Initial probes after its
    first one or two datagrams (a ClientHello may take two) too, so the server's own
    timer fires with both spaces in flight and nothing acknowledged. Read off the server side's capture: each of the server's own probes
    before it confirmed the handshake (its first HANDSHAKE_DONE) with unacknowledged
    ack-eliciting packets in both the Initial and the Handshake space carries, with the
    datagrams the same expiry sent, an ack-eliciting packet of each; the Initial space
    ends when a client Handshake packet reaches it. A server whose budget under the
    anti-amplification limit (RFC 9000 §8.1) is spent sends no probe, and its example is
    not exercised. Judged on the target's server, which sends the download's data.
    Trigger: a probe with packets in flight in both spaces."""
    if target.direction != "download":
        outcomes.not_applicable("judged on the target's server, which sends the download's data")
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        # Initial and Handshake, the pair the RFC names: a server's 1-RTT packets before
        # the handshake (0.5-RTT data, NEW_CONNECTION_ID) wait for keys the client gets
        # from those two, and a probe spends a budget the amplification limit keeps small.
        judge(target, "server", server_probes(obs.wire), ("initial", "handshake"))


#: Two spaces whose last sends were closer than this went out in one flight or one
#: expiry: their timers are one, and a probe may carry either (µs).
SAME_SEND_US = CLIENT_PROBE_BURST_US


@example(schedule=handshake.server_first_flight_dropped(BaseLink(rtt_us=40_000), 0, 2, 2))
@example(schedule=handshake.server_first_flight_dropped(BaseLink(rtt_us=40_000), 0, 2, 2, client_first=2))
@example(schedule=handshake.server_first_flight_dropped(BaseLink(rtt_us=40_000), 0, 3, 2, client_first=2))
@given(schedule=handshake.server_first_flights_dropped())
def test_server_probes_the_space_whose_timer_is_earlier(longlook, target, schedule):
    """RFC 9002 §6.2.1: "When ack-eliciting packets in multiple packet number spaces
    are in flight, the timer MUST be set to the earlier value of the Initial and
    Handshake packet number spaces", and §6.2.4: "When a PTO timer expires, a sender
    MUST send at least one ack-eliciting packet in the packet number space as a probe."
    Both spaces' timers run one period (neither counts max_ack_delay) with one backoff,
    each from its space's last ack-eliciting send, so once a probe has carried one space
    alone the other's timer is the earlier, and the next probe must carry that space.
    The schedules are the server-probe property's; read off the server side's capture:
    each of the server's own probes with both spaces unacknowledged, whose last sends in
    them were SAME_SEND_US apart or more, carries an ack-eliciting packet of the space
    sent in longer ago. When the probe leaves is not judged: the period before an RTT
    sample rests on each stack's initial RTT. Judged on the target's server, which sends
    the download's data. Trigger: such a probe (a server that coalesces both spaces in
    every probe never gives one)."""
    if target.direction != "download":
        outcomes.not_applicable("judged on the target's server, which sends the download's data")
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        found = server_probes(obs.wire)
        judged, bad = earlier_timer_misses(found.probes, ("initial", "handshake"), SAME_SEND_US)
        if not judged:
            outcomes.not_exercised(f"none of the server's {len(found.probes)} probes before it confirmed the "
                                   f"handshake left with Initial and Handshake packets in flight whose last sends "
                                   f"were {SAME_SEND_US / 1e3:.0f} ms apart or more")
        first = bad[0] if bad else None
        check(not bad, "probe-not-of-the-earlier-timer", lambda: (
            f"{target.id}: {len(bad)} of the server's {len(judged)} probes with Initial and Handshake packets in "
            f"flight carry none of the space whose timer was the earlier; first at t={first[0].first.t_us / 1e6:.4f} "
            f"s: last {first[1]} send at t={first[0].last_sent[first[1]] / 1e6:.4f} s, the other's at "
            f"t={max(first[0].last_sent.values()) / 1e6:.4f} s, and the probe's datagrams carry "
            f"{[[(p.space, p.ack_eliciting) for p in d.packets] for d in first[0].burst]}"
        ), bad=len(bad), judged=len(judged))
