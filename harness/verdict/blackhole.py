"""What a blackhole of the data direction shows on the wire: the stretch with no news
for the sender, whether the blackhole hit the transfer under way, and the datagrams
the sender's timers sent in it (its PTO probes).

Shared by the properties that judge probes: how many datagrams a PTO sends
(test_sending), that they elicit acknowledgements (test_sending) and that the sender
counts them in flight (test_bytes_in_flight). The schedules are those of
strategies.dark / blackholes / long_blackholes: phase 1 is the dark, phase 2 the light.
"""

from __future__ import annotations

import bisect

from harness.verdict import analysis, outcomes
from harness.verdict.bounds import BETA

#: A server answers a client datagram within the client's max_ack_delay (25 ms by
#: default, RFC 9000 §18.2), plus the timer's granularity: a non-eliciting datagram
#: this soon after one arrived is an acknowledgement, not a probe (µs).
ANSWER_US = 30_000


def quiet_period(obs, schedule) -> tuple[float, float]:
    """(from, to) µs of the blackhole's stretch with no news for the sender: from the
    last acknowledgement with news before the link came back (data delivered before
    the dark is still acknowledged) to the first one after it."""
    dark_from, dark_to = schedule.phases[1].start_us, schedule.phases[2].start_us
    news = analysis.new_ack_arrivals(obs.wire)
    quiet_from = max((t for t in news if t < dark_to), default=dark_from)
    quiet_to = min((t for t in news if t >= dark_to), default=float("inf"))
    return quiet_from, quiet_to


def hit_the_transfer(obs, schedule) -> None:
    """Not exercised unless the transfer was under way when the link went dark: in
    real time an endpoint's start-up may put the whole handshake into the blackhole."""
    dark_from = schedule.phases[1].start_us
    if not any(d.entered and d.direction == "s2c" and d.t_us < dark_from and
               any(p.space == "application" and p.ack_eliciting for p in d.packets) for d in obs.wire.datagrams):
        outcomes.not_exercised("the blackhole began before the transfer sent any data")


def probe_datagrams(obs, schedule):
    """(datagrams, quiet_from): the sender's datagrams of the blackhole's quiet period
    that answer no client datagram (none arrived within ANSWER_US before): what its
    timers sent."""
    view = obs.wire
    quiet_from, quiet_to = quiet_period(obs, schedule)
    arrivals = [d.t_us for d in view.datagrams if not d.entered and d.direction == "c2s"]
    out = []
    for d in view.datagrams:
        if d.entered and d.direction == "s2c" and quiet_from < d.t_us < quiet_to:
            i = bisect.bisect_right(arrivals, d.t_us)
            if i and d.t_us - arrivals[i - 1] <= ANSWER_US:
                continue
            out.append(d)
    return out, quiet_from


#: Datagrams in a row the link must have dropped, and nothing delivered after, before
#: a failed transfer is put down to the link: one or two drops at the end are an
#: endpoint's last word lost, not a cut-off it had to live through.
DARK_TAIL_DROPS = 3


def dark_tail(records) -> tuple[float, int] | None:
    """(since_us, dropped) when the link delivered nothing of the transfer's flow,
    either way, from the datagram that entered at since_us to the end of its log, and
    dropped the `dropped` (at least DARK_TAIL_DROPS) datagrams the endpoints sent into
    that stretch; else None. A schedule's random loss can do that (a Gilbert-Elliott
    bad state that lasts), and then an idle timeout ends the connection as RFC 9000
    §10.1 has it: a failed transfer says nothing about the stack. A drop of the
    stack's own making (a malformed datagram) never counts as the link's."""
    dropped = 0
    since = None
    for r in sorted(records, key=lambda r: r.arr_us, reverse=True):
        if r.fate in ("delivered", "duplicate") or (r.fate == "dropped" and r.reason == "malformed"):
            break
        if r.fate == "dropped":
            dropped += 1
            since = r.arr_us
    return (since, dropped) if dropped >= DARK_TAIL_DROPS else None


def collapses(trace, family: str) -> list[analysis.Reduction]:
    """The window's cuts to about kMinimumWindow (RFC 9002 §7.6.2's persistent
    congestion): from at least 8 datagrams to at most 3, deeper than any multiplicative
    decrease explains (β·cwnd, or for CUBIC β·bytes in flight as logged with the cut,
    RFC 9438 §4.6), with a datagram of slack."""
    mss = analysis.max_datagram(trace)
    beta = BETA.get(family) or 0.5

    def decrease(c) -> float:
        # A logged 0 in flight is a value: a CUBIC that subtracts the lost packets
        # before taking β of the flight (aioquic) lands on its floor by rule.
        flight = c.bytes_in_flight if c.bytes_in_flight is not None else c.before
        return min(beta * c.before, beta * flight) if family == "cubic" else beta * c.before

    return [c for c in analysis.reductions(trace) if c.after <= 3 * mss and c.before >= 8 * mss
            and c.after < decrease(c) - mss]


def ack_eliciting_by_link_index(obs) -> dict[int, bool]:
    """For each server datagram the sender-side capture saw enter the link, by its
    index in the link's log: whether it held an ack-eliciting packet (decrypted). Only
    those may bound a persistent congestion period (§7.6.2: "These two packets MUST be
    ack-eliciting")."""
    return {d.link_idx: any(p.ack_eliciting for p in d.packets) for d in obs.wire.datagrams
            if d.entered and d.direction == "s2c" and d.link_idx is not None}
