"""The probe timeout backs off exponentially.

RFC 9002 §6.2.1: "When a PTO timer expires, the PTO backoff MUST be increased,
resulting in the PTO period being set to twice its current value." The timer is
re-armed from the last ack-eliciting packet sent (the probe), so while nothing is
acknowledged the gaps between successive probe bursts double.

Read off the wire (the sender side's decrypted capture), not a stack's timer log:
during a blackhole of the data direction nothing reaches the client, so once the last
acknowledgement with news has reached the sender, every ack-eliciting datagram it
emits is a timer-driven probe. ACK-only datagrams (answers to the client's own
probes) are not probes and are left out.
"""

from __future__ import annotations

from hypothesis import assume, example, given

from harness.schedule import TransferPlan, strategies
from harness.schedule.strategies import BaseLink
from harness.verdict import analysis
from harness.verdict.deviation import check

PLAN = TransferPlan(sizes=(4_000_000,))
#: Each timeout's gap over the previous one: 2 (§6.2.1), with a margin for timer
#: granularity and the probe's own pacing (a few ms against gaps ≥ 100 ms).
BACKOFF_LOW, BACKOFF_HIGH = 1.6, 2.5


@example(schedule=strategies.dark(BaseLink(), 0, 600, 2000))
@given(schedule=strategies.long_blackholes())
def test_pto_backs_off_exponentially(longlook, target, schedule):
    """Successive PTO probe bursts during a blackhole are spaced by doubling gaps."""
    dark_from, dark_to = schedule.phases[1].start_us, schedule.phases[2].start_us
    rtt_us = 2 * schedule.phases[0].s2c.delay_us
    with longlook.run(target, schedule, PLAN, timeout_s=60) as obs:
        obs.completed()
        view = obs.wire
        sent = analysis.ack_eliciting_sends(view)
        # The transfer must have been under way when the link went dark.
        assume(any(t < dark_from for t in sent) and any(t >= dark_to for t in sent))
        # Acknowledgements of data delivered before the dark still reach the sender
        # and let it send more; probes start after the last one. (The client's own
        # probes keep arriving during the dark, with nothing new in their ACKs.)
        quiet_from = max((t for t in analysis.new_ack_arrivals(view) if t < dark_to), default=dark_from)
        # A probe timeout exceeds the RTT, and one timeout's datagrams leave together:
        # half an RTT separates bursts without splitting one.
        probes = analysis.bursts([t for t in sent if quiet_from < t < dark_to], rtt_us / 2)
        ends = [last for _, last, _ in probes]
        listing = ", ".join(f"{(e - dark_from) / 1e3:.0f}" for e in ends[:10])
        check(len(probes) >= 2, "too-few-probes", (
            f"{target.id}: {len(probes)} probe bursts during a {(dark_to - dark_from) / 1e3:.0f} ms blackhole "
            f"(from the last acknowledgement at +{(quiet_from - dark_from) / 1e3:.0f} ms); "
            f"a PTO is at most a few RTTs ({rtt_us / 1e3:.0f} ms) long"
        ), probes=len(probes))
        gaps = [b - a for a, b in zip(ends, ends[1:])]
        for k, (g0, g1) in enumerate(zip(gaps, gaps[1:])):
            ratio = g1 / g0
            check(BACKOFF_LOW <= ratio <= BACKOFF_HIGH, "pto-backoff", (
                f"{target.id}: probe bursts at +[{listing}] ms into the blackhole: gap {k + 2} is "
                f"{g1 / 1e3:.0f} ms after a gap of {g0 / 1e3:.0f} ms (×{ratio:.2f}); §6.2.1 doubles the PTO "
                f"at each timeout (accepted ×{BACKOFF_LOW}…×{BACKOFF_HIGH})"
            ), ratio=ratio)
