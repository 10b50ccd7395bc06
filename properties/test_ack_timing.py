"""Acknowledgements while the sender's data waits for its pacer or its window.

RFC 9002 §7.7: "Packets containing only ACK frames SHOULD therefore not be paced, to
avoid delaying their delivery to the peer"; §7: they "are not congestion controlled".
What delay is too much is bounded by RFC 9000 §13.2.1: an endpoint acknowledges every
ack-eliciting 1-RTT packet within the max_ack_delay it declared. So the sender's
acknowledgement of each ack-eliciting 1-RTT packet of its peer (a request, a
flow-control update, a PING, a NEW_CONNECTION_ID) must leave within that max_ack_delay,
plus a timer's lateness (TIMER_SLACK_US), of the packet's arrival, also
when it falls due while the sender has a response under way that its pacer or its
full window holds back (harness/verdict/ack_timing.py reads both from the sender
side's decrypted capture). A sender that sends the acknowledgement only with its next
data packet fails where that packet comes later than the bound.

A pacer's gap between datagrams is the window's share of the round trip: long when
the window is small and the round trip long. The schedules give it that chance:
round trips of 400-800 ms at 2-8 Mbit/s, a few datagrams dropped early so the window
stays small, and objects fetched one after another, so that each request reaches the
sender while it is still sending, from the first window on.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from harness.rfc import K_GRANULARITY_US
from harness.schedule import TransferPlan, strategies
from harness.schedule.strategies import QUIC, BaseLink
from harness.schedule.types import Action
from harness.verdict import ack_timing, outcomes
from harness.verdict.deviation import check

#: Objects fetched one after another: a request reaches the sender at each object's
#: start, and the client's flow-control updates during each.
PLAN = TransferPlan(sizes=(100_000,) * 4, testcase="transfer")
#: How late the sender's ACK timer may fire, µs: two of RFC 9002 §6.1.2's kGranularity
#: in virtual time; in real time also a wake-up that a busy 2-core host delays by a few
#: ms (ngtcp2 acknowledged 29.4 and 30.3 ms after arrival in 2 of 10 real-time
#: examples, against its 25 ms max_ack_delay). The acknowledgements a pacer or a full
#: window holds wait tens of ms (F105, F106, F107), above either bound.
TIMER_SLACK_US = {"virtual": 2 * K_GRANULARITY_US, "real": 10_000}

LONG_RTT_LINKS = st.builds(BaseLink, rate_bps=st.sampled_from([2_000_000, 4_000_000, 8_000_000]),
                           rtt_us=st.sampled_from([400_000, 600_000, 800_000]))
#: The sender's datagrams dropped: among its first few windows, where a loss leaves
#: the window a few datagrams over a long round trip (a pacer's gap of tens of ms).
EARLY_DROPS = st.lists(st.integers(min_value=12, max_value=80), min_size=1, max_size=3, unique=True).map(
    lambda indices: [Action("s2c", i, "drop", flow=QUIC) for i in sorted(indices)])


@strategies.replayable
def long_round_trips() -> st.SearchStrategy:
    """A long round trip and a few early drops of the sender's datagrams."""
    return st.builds(lambda base, seed, drops: base.schedule(seed, actions=drops),
                     LONG_RTT_LINKS, strategies.seeds, EARLY_DROPS)


@example(schedule=BaseLink(rate_bps=4_000_000, rtt_us=500_000).schedule(0))
@given(schedule=long_round_trips())
def test_acknowledgements_due_while_data_waits_leave_within_max_ack_delay(longlook, target, schedule):
    """Every ack-eliciting 1-RTT packet of the peer that arrives after the sender's
    handshake is confirmed, and whose acknowledgement falls due while the sender still
    has a stream's data to send (it sent the stream's first bytes, not yet its FIN), is
    acknowledged by a datagram of the sender within its max_ack_delay plus
    TIMER_SLACK_US (2 ms in virtual time, 10 ms in real time). Trigger: one such
    packet."""
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        slack_us = TIMER_SLACK_US["virtual" if obs.example.mode == "virtual" else "real"]
        owed = ack_timing.owed_acks(obs.wire, slack_us)
        judged = [o for o in owed if o.sending]
        if not judged:
            outcomes.not_exercised(f"no acknowledgement fell due while the sender had a response under way "
                                   f"({len(owed)} owed after the handshake)")
        late = [o for o in judged if o.late]
        first = late[0] if late else None
        check(not late, "ack-held-past-max-ack-delay", lambda: (
            f"{target.id}: {len(late)} of {len(judged)} acknowledgements due while a response was under way left after "
            f"its max_ack_delay + {slack_us / 1e3:.0f} ms; first: the peer's packet {first.pn} arrived at "
            f"t={first.arrived_us / 1e6:.4f} s, due by t={first.deadline_us / 1e6:.4f} s, acknowledged "
            + (f"at t={first.acked_us / 1e6:.4f} s" if first.acked_us is not None else "never")
        ), late=len(late), worst_delay_ms=max((o.delay_us or 0) for o in late) / 1e3 if late else 0.0)
