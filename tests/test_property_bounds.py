"""The bounds properties derive from a schedule, checked by hand-worked examples:
a wrong bound would make a property pass or fail for the wrong reason."""

from __future__ import annotations

import pytest

from harness.schedule.strategies import BaseLink
from properties.test_bandwidth_drop import DroppedPath, drop


def test_drop_path_reads_the_schedule():
    p = DroppedPath(drop(BaseLink(rate_bps=10_000_000, rtt_us=40_000), 2000))
    assert (p.t0_us, p.rate_old, p.rate_new, p.rtt_us) == (2_000_000, 10_000_000, 1_000_000, 40_000)
    # The queue stays at one BDP of the old rate: 50 kB, 400 ms to drain at 1 Mbit/s.
    assert p.queue == 50_000 and p.full_buffer_us == pytest.approx(400_000)


@pytest.mark.parametrize("beta, rounds", [(0.5, 3), (0.7, 4), (0.9, 8)])
def test_settle_time_is_the_reductions_beta_needs_plus_two_round_trips(beta, rounds):
    # Window before the drop ≤ BDP_old + queue = 100 kB; the slower path holds
    # BDP_new + queue = 55 kB: a factor 1.82, i.e. log(1.82)/log(1/β) reductions.
    p = DroppedPath(drop(BaseLink(rate_bps=10_000_000, rtt_us=40_000), 2000))
    assert p.settle_us(beta) == pytest.approx(rounds * (40_000 + 400_000))


def test_a_mild_drop_still_allows_one_reduction():
    p = DroppedPath(drop(BaseLink(rate_bps=10_000_000, rtt_us=40_000), 2000, fraction=0.95))
    assert p.settle_us(0.5) == pytest.approx(3 * (40_000 + p.full_buffer_us))


def test_the_plan_outlasts_the_settle_time_at_the_new_rate():
    p = DroppedPath(drop(BaseLink(rate_bps=20_000_000, rtt_us=80_000), 3000))
    after = p.plan().sizes[0] - 0.8 * p.rate_old * p.t0_us / 8e6
    assert after * 8e6 / p.rate_new >= p.settle_us(0.7) + 4e6


@pytest.mark.parametrize("values, runs, settled", [
    ([1.2], 3, True),               # within the bound: three runs could no longer all exceed it
    ([1.6], 3, False),
    ([1.6, 1.7], 3, False),
    ([1.6, 1.7, 1.8], 3, True),     # every run made
    ([1.2], 10, False),             # the sign test needs every run
])
def test_fairness_stops_once_the_verdict_is_settled(values, runs, settled):
    from properties.test_fairness import decided

    assert decided(values, 1.5, runs) is settled


def test_a_hold_counts_its_extra_delay_over_the_datagrams_that_overtook_it():
    from harness.observe.groundtruth import PacketRecord
    from properties.test_reordering import held_extra_delays

    def rec(idx, arr, dep, marks=()):
        return PacketRecord(dir="s2c", idx=idx, fidx=idx, flow="udp", proto="udp", sport=443, dport=40000,
                            size=1252, arr_us=arr, fate="delivered", reason=None, dep_us=dep, qbytes=0,
                            marks=marks)

    # idx 1 is held until idx 2 and 3 have left: 20 ms in the link against their 10 ms.
    records = [rec(0, 0, 10_000), rec(1, 100, 20_100, ("held",)), rec(2, 200, 10_200), rec(3, 5_000, 15_000)]
    (held, extra), = held_extra_delays(records, [records[1]])
    assert held.idx == 1 and extra == 10_000


def test_bytes_newly_acknowledged_counts_each_packet_once_within_the_window():
    from types import SimpleNamespace as NS

    from harness.observe.quic_frames import Ack
    from harness.verdict.analysis import bytes_newly_acknowledged

    def packet(pn, frames=()):
        return NS(space="application", pn=pn, size=1000, frames=frames, ack_eliciting=not frames)

    def sent(t, pn):
        return NS(t_us=t, direction="s2c", conn=0, packets=[packet(pn)])

    def ack(t, low, high):
        return NS(t_us=t, direction="c2s", conn=0,
                  packets=[packet(0, (Ack(largest=high, ranges=((low, high),), delay=0),))])

    view = NS(side="server", path="x", connections=[NS(ack_delay_exponent={"c2s": 3, "s2c": 3})],
              datagrams=[sent(0, 1), sent(1, 2), sent(2, 3), sent(3, 4), ack(10_000, 1, 2),
                         ack(20_000, 1, 3), ack(30_000, 1, 4), ack(90_000, 1, 4)])
    # From 15 ms to 30 ms: pn 3 and pn 4 newly acknowledged; pn 1-2 were before it.
    assert bytes_newly_acknowledged(view, 15_000, 30_000, slack_us=1_000) == 2000
    assert bytes_newly_acknowledged(view, 0, 5_000, slack_us=1_000) == 0
