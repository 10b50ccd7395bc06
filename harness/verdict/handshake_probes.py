"""An endpoint's own timer-driven datagrams before the handshake is confirmed, read
off its decrypted capture: which datagrams are probes, the datagrams one expiry sends,
and what the endpoint had in flight in each packet number space when it probed.

Shared by the handshake properties (what a client probe must carry, RFC 9002
§6.2.2.1, and which spaces a client's or a server's probe covers, §6.2.4). A probe is
told from the wire alone, since no stack logs its handshake timer's expiry: a send of
its own, after a silence on both directions longer than any answer takes and shorter
than any handshake PTO.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from harness.observe.quic_frames import NOT_ACK_ELICITING
from harness.verdict import analysis

#: A client datagram is its own timer's (a probe) when no server datagram reached the
#: client, and the client sent nothing, for this long before it: a client answers a
#: server flight (its Finished, then its request) within a few ms, and its handshake
#: PTO is at least an RTT plus 4 × rttvar (µs).
CLIENT_PROBE_QUIET_US = 20_000
#: The datagrams one timer expiry sends leave together: those within this of a probe's
#: first datagram are its too (µs).
CLIENT_PROBE_BURST_US = 5_000


@dataclass(frozen=True)
class Probe:
    """One expiry of an endpoint's timer as its capture shows it."""

    first: object  # the probe's first datagram (harness.observe.wire.Datagram)
    burst: tuple  # that datagram and those the same expiry sent (within CLIENT_PROBE_BURST_US)
    #: Packet number spaces in which the endpoint had ack-eliciting packets that no ACK
    #: reaching it had acknowledged when it probed (the Initial space is left when RFC
    #: 9001 §4.9.1 discards its keys: client_probes, server_probes).
    in_flight: frozenset[str]
    #: When the endpoint last sent an ack-eliciting packet of each space in flight, µs
    #: (RFC 9002's time_of_last_ack_eliciting_packet, from which each space's timer runs).
    last_sent: dict = field(default_factory=dict)

    def carries(self, space: str) -> bool:
        """The expiry sent an ack-eliciting packet of `space`."""
        return any(p.space == space and p.ack_eliciting for d in self.burst for p in d.packets)


@dataclass(frozen=True)
class HandshakeProbes:
    probes: tuple[Probe, ...]
    keys_at: float  # when the endpoint first had Handshake keys on the wire (µs), or infinity
    confirmed_at: float  # when its handshake was confirmed (µs), or infinity


def first_request(sends) -> int | None:
    """Index of the client's first datagram that carries STREAM data, when all its
    ack-eliciting content is 1-RTT STREAM frames starting at offset 0: its request,
    which a slow client can send more than CLIENT_PROBE_QUIET_US after the server's
    flight, and which no timer sent. Only that one datagram: any later send of new
    data before confirmation may be a probe, and is judged as one."""
    for k, d in enumerate(sends):
        frames = [f for p in d.packets if p.ack_eliciting for f in p.frames
                  if getattr(f, "name", "") not in NOT_ACK_ELICITING]
        streams = [f for f in frames if getattr(f, "name", "") == "stream"]
        if not streams:
            continue
        only_request = len(streams) == len(frames) and all(f.offset == 0 for f in streams) and all(
            p.space == "application" for p in d.packets if p.ack_eliciting)
        return k if only_request else None
    return None


def client_probes(view) -> HandshakeProbes:
    """Every ack-eliciting datagram the client sent on its own (nothing from the server
    reached it and it sent nothing for CLIENT_PROBE_QUIET_US before) until a
    HANDSHAKE_DONE reached it, its request excepted, with what it had in flight then.
    The client leaves the Initial space when it first sends a Handshake packet."""
    arrivals = [d for d in view.datagrams if not d.entered and d.direction == "s2c"]
    keys_at = min((d.t_us for d in arrivals if any(p.space == "handshake" for p in d.packets)),
                  default=float("inf"))
    confirmed_at = analysis.handshake_done_at(view)
    sends = [d for d in view.datagrams if d.entered and d.direction == "c2s"]
    probes = _own_sends(sends, arrivals, confirmed_at, first_request(sends),
                        lambda d, sent: sent and any(p.space == "handshake" for p in d.packets))
    return HandshakeProbes(probes, keys_at, confirmed_at)


def server_probes(view) -> HandshakeProbes:
    """The same for the server, read off its own capture: its ack-eliciting datagrams
    sent on its own until it confirmed the handshake (its first HANDSHAKE_DONE sent),
    with what it had in flight then. The server leaves the Initial space when a
    Handshake packet of the client's first reaches it (RFC 9001 §4.9.1); `keys_at` is
    its first Handshake send."""
    arrivals = [d for d in view.datagrams if not d.entered and d.direction == "c2s"]
    sends = [d for d in view.datagrams if d.entered and d.direction == "s2c"]
    keys_at = min((d.t_us for d in sends if any(p.space == "handshake" for p in d.packets)), default=float("inf"))
    confirmed_at = analysis.handshake_confirmed_us(view) or float("inf")
    probes = _own_sends(sends, arrivals, confirmed_at, None,
                        lambda d, sent: not sent and any(p.space == "handshake" for p in d.packets))
    return HandshakeProbes(probes, keys_at, confirmed_at)


def _own_sends(sends, arrivals, end_us: float, skip: int | None, leaves_initial) -> tuple[Probe, ...]:
    """The sends before `end_us` that followed CLIENT_PROBE_QUIET_US of silence both
    ways (but the `skip`-th), each with its expiry's datagrams and the spaces in which
    ack-eliciting packets were unacknowledged just before it. `leaves_initial(d, sent)`
    tells whether datagram d (sent by this side, or reaching it) ends the Initial
    space. The events are walked in time order; an arrival at the same µs as a send
    counts as before it (virtual time answers in no time).

    A send while some unacknowledged packet lies below its space's largest
    acknowledged is left out: loss detection may have declared that packet lost (RFC
    9002 §6.1, either threshold), and a pacer may release its retransmission tens of
    ms after the ACK, in a silence that looks like a timer's."""
    heard = sorted(d.t_us for d in arrivals)
    events = sorted([(d.t_us, 0, d) for d in arrivals] + [(d.t_us, 1, d) for d in sends], key=lambda e: e[:2])
    outstanding: dict[str, set[int]] = {}  # space -> ack-eliciting packet numbers not yet acknowledged
    seen: dict[int, frozenset[str]] = {}  # id(datagram sent) -> spaces in flight just before it left
    last: dict[str, float] = {}  # space -> the last ack-eliciting send in it so far
    before: dict[int, dict[str, float]] = {}  # id(datagram sent) -> `last` of its spaces in flight before it
    largest: dict[str, int] = {}  # space -> largest acknowledged so far
    recovering: set[int] = set()  # id(datagram sent) while a packet below its space's largest acknowledged waited
    for _, is_send, d in events:
        if leaves_initial(d, bool(is_send)):
            outstanding.pop("initial", None)
        if not is_send:
            for p in d.packets:
                for f in p.frames:
                    if getattr(f, "name", "") == "ack":
                        outstanding.get(p.space, set()).difference_update(f.acked())
                        largest[p.space] = max(largest.get(p.space, -1), f.largest)
            continue
        seen[id(d)] = frozenset(s for s, pns in outstanding.items() if pns)
        if any(pns and min(pns) < largest.get(s, -1) for s, pns in outstanding.items()):
            recovering.add(id(d))
        before[id(d)] = {s: last[s] for s in seen[id(d)] if s in last}
        for p in d.packets:
            if p.ack_eliciting and p.pn is not None and (p.space != "initial" or not leaves_initial(d, True)):
                outstanding.setdefault(p.space, set()).add(p.pn)
                last[p.space] = d.t_us
    probes = []
    for k, (prev, d) in enumerate(zip(sends, sends[1:]), start=1):
        if d.t_us >= end_us or not any(p.ack_eliciting for p in d.packets) or k == skip or id(d) in recovering:
            continue
        i = bisect.bisect_right(heard, d.t_us)
        if d.t_us - prev.t_us < CLIENT_PROBE_QUIET_US or (i and d.t_us - heard[i - 1] < CLIENT_PROBE_QUIET_US):
            continue
        # The expiry's datagrams: this one and those right after it (a stack may send
        # its 1-RTT data first and the Handshake packet in the next one).
        burst = tuple(e for e in sends[k:] if e.t_us - d.t_us <= CLIENT_PROBE_BURST_US)
        probes.append(Probe(d, burst, seen[id(d)], before[id(d)]))
    return tuple(probes)


def earlier_timer_misses(probes, spaces: tuple[str, str], same_us: float) -> tuple[list[Probe], list[tuple[Probe, str]]]:
    """(the probes judged, those of them that miss the space whose timer was the earlier,
    with that space). Judged: a probe with both `spaces` in flight whose last
    ack-eliciting sends in them were `same_us` apart or more. One period and one backoff
    serve both spaces (RFC 9002 §6.2.1), so the earlier timer is the space sent in
    longer ago."""
    judged, bad = [], []
    for probe in probes:
        sent = probe.last_sent
        if not set(spaces) <= set(sent) or abs(sent[spaces[0]] - sent[spaces[1]]) < same_us:
            continue
        earlier = min(spaces, key=sent.__getitem__)
        judged.append(probe)
        if not probe.carries(earlier):
            bad.append((probe, earlier))
    return judged, bad
