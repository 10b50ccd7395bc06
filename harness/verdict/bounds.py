"""Bounds derived from a schedule, shared by the properties: how long a transfer
may take, what the link can carry. Margins are generous on purpose: a property
fails on behaviour, not on scheduler noise."""

from __future__ import annotations

from harness.rfc import FAMILY_BETA
from harness.schedule import Schedule

#: kLossReductionFactor per family (harness.rfc): a controller is judged by its
#: family's β, never by the one its factory claims.
BETA = FAMILY_BETA


def transfer_time_bound_s(schedule: Schedule, total_bytes: int) -> float:
    """Upper bound for a transfer that the link lets through: 20× the time at the
    slowest rate any phase gives the data direction, plus 20 RTTs for the handshake
    and recoveries, plus every blackhole's and outage's length twice (PTO backoff after it), plus
    10 s for process start-up on a loaded machine."""
    rates = [p.s2c.rate_bps for p in schedule.phases if p.s2c.rate_bps]
    slowest = min(rates) if rates else 1_000_000_000
    rtt_s = 2 * max((p.s2c.delay_us or 0) for p in schedule.phases) / 1e6
    dark_s = 0.0
    for i, p in enumerate(schedule.phases):
        if p.s2c.blackhole:
            end = schedule.phases[i + 1].start_us if i + 1 < len(schedule.phases) else p.start_us
            dark_s += (end - p.start_us) / 1e6
    dark_s += sum(a.duration_us for a in schedule.actions if a.action == "outage") / 1e6
    return 20 * total_bytes * 8 / slowest + 20 * rtt_s + 2 * dark_s + 10.0


def path_rtt_us(schedule: Schedule) -> float:
    """The least round trip any phase's link gives: both directions' base delays
    (jitter only adds, and per-packet actions only hold or delay). No RTT sample of
    a real path can be shorter."""
    return min((p.c2s.delay_us or 0) + (p.s2c.delay_us or 0) for p in schedule.phases)
