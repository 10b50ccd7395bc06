"""Early retransmission of the handshake's CRYPTO data, a limited number of times.

RFC 9002 §6.2.3: "When a server receives an Initial packet containing duplicate CRYPTO
data, it can assume the client did not receive all of the server's CRYPTO data sent in
Initial packets ... To speed up handshake completion under these conditions, an
endpoint MAY, for a limited number of times per connection, send a packet containing
unacknowledged CRYPTO data earlier than the PTO expiry ... Doing so at most once for
each connection is adequate to quickly recover from a single packet loss. An endpoint
that always retransmits packets in response to receiving packets that it cannot
process risks creating an infinite exchange of packets."

The server's direction is dark for its first 15.5-17 s, so nothing it sends reaches
the client and the client retransmits its ClientHello on its own probe timer (about 1,
3, 7 and 15 s after its first send): four duplicates or more reach the server before
it can be heard. harness/verdict/early_crypto.py counts, from the server side's
decrypted capture, the duplicates the server answered at once with CRYPTO data it had
sent before, keeping out what its own timer and its anti-amplification limit send.
"A limited number of times" is read as at most EARLY_LIMIT: the RFC calls one enough,
and a server that answers four duplicates of one handshake shows no limit.
"""

from __future__ import annotations

from hypothesis import example, given

from harness.rfc import K_GRANULARITY_US
from harness.schedule import TransferPlan, handshake
from harness.schedule.strategies import BaseLink
from harness.verdict import early_crypto, outcomes
from harness.verdict.deviation import check

#: The suite's reading of RFC 9002 §6.2.3's "a limited number of times per connection".
EARLY_LIMIT = 3
#: A server datagram this soon after a duplicate arrived answers it, µs: its
#: processing time, two of kGranularity in virtual time; in real time also a busy
#: host's scheduling. The server's own timer fires hundreds of ms away (the schedule).
ANSWER_US = {"virtual": 2 * K_GRANULARITY_US, "real": 15_000}
#: A small object: the property is over once the handshake is.
PLAN = TransferPlan(sizes=(50_000,))


@example(schedule=handshake.server_dark_hello_late(BaseLink(rtt_us=40_000), 0, 16_000, 400))
@given(schedule=handshake.server_dark_duplicates())
def test_server_resends_crypto_early_a_limited_number_of_times(longlook, target, schedule):
    """The server answers at most EARLY_LIMIT of the duplicate ClientHellos that reach
    it before the client's address is validated with an early retransmission of its
    CRYPTO data: a datagram resending CRYPTO bytes it had sent, within ANSWER_US of
    the duplicate (2 ms in virtual time, 15 ms in real time), that its
    anti-amplification budget allowed before the duplicate arrived. Judged on the
    target's server, whatever the client. Trigger: more than EARLY_LIMIT duplicates
    arrived while the server could have sent a full datagram."""
    if target.direction != "download":
        outcomes.not_applicable("judged on the target's server, which receives the client's ClientHello")
    # How often a client probes before it gives up, and how much of its budget a
    # server's own probes leave, are the stacks' habits more than the schedule's: an
    # example short of duplicates counts toward max_examples instead of a hunt.
    with outcomes.rare_trigger(), longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        answer_us = ANSWER_US["virtual" if obs.example.mode == "virtual" else "real"]
        found = early_crypto.early_answers(obs.wire, answer_us)
        chances = found.opportunities
        if len(chances) <= EARLY_LIMIT:
            outcomes.not_exercised(f"{len(chances)} duplicate ClientHellos reached the server while it could send "
                                   f"(of {len(found.duplicates)} before validation); more than {EARLY_LIMIT} needed")
        early = found.early
        check(len(early) <= EARLY_LIMIT, "early-crypto-resend-unlimited", lambda: (
            f"{target.id}: the server answered {len(early)} of the {len(chances)} duplicate ClientHellos that reached "
            f"it before the client's address was validated with an immediate retransmission of its CRYPTO data, at "
            + ", ".join(f"t={d.t_us / 1e6:.3f} s" for d in early)
            + f"; RFC 9002 §6.2.3 allows that a limited number of times per connection (once is adequate; the suite "
            f"allows {EARLY_LIMIT})"
        ), early=len(early), duplicates=len(chances))
