"""No window growth while application-limited, and growth while only the pacer holds
the sender back.

RFC 9002 §7.8: when bytes in flight is smaller than the congestion window and
sending is not pacing limited, the window is under-utilised and SHOULD NOT be
increased in either slow start or congestion avoidance. "A sender SHOULD NOT
consider itself application limited if it would have fully utilized the congestion
window without pacing delay."

The client fetches small objects one after another with a pause between them, so
the sender never has more than one small object in flight. A window that grows
anyway (Kakhki et al. saw Chromium's QUIC do so) lets the sender burst far beyond
what the path has shown it can carry once the application has more to send.
"""

from __future__ import annotations

from hypothesis import example, given

from harness.observe.events import Metrics, PacketSent
from harness.run import Inconclusive
from harness.schedule import TransferPlan, strategies
from harness.verdict import analysis, outcomes
from harness.verdict.bounds import BETA
from harness.model.tracefile import APP_LIMITED_SHARE
from harness.verdict.deviation import check
from properties.test_slow_start import EXITS

#: 40 objects of 3000 bytes (three datagrams), 20 ms apart.
PLAN = TransferPlan(sizes=(3_000,) * 40, testcase="appidle", think_ms=20)
#: RFC 9002 says any window above bytes in flight is under-used; growth is accepted
#: while at least this fraction of the window was in flight (in slow start a sender
#: that sends at its window has half of it in flight when the first ACKs return).
#: The model's trace validation marks a dry sender app-limited by the same margin.
UTILISED_FRACTION = APP_LIMITED_SHARE


@example(schedule=strategies.CLEAN_LINK)
@given(schedule=strategies.loss_only())
def test_no_window_growth_while_application_limited(longlook, target, schedule):
    """Every increase of the window follows a time when at least half of the
    previous window was in flight."""
    if target.cc.family not in BETA:
        # §7.8 names slow start and congestion avoidance, and lets other controllers
        # use an alternative: BBR bounds its window by its own model (cwnd_gain·BDP),
        # which the BBR properties judge (shared/reference/bbr.md §1.6).
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no slow start or congestion "
                                f"avoidance for RFC 9002 §7.8 to restrain")
    with longlook.run(target, schedule, PLAN) as obs:
        obs.completed()
        trace = obs.sender
        series = analysis.inflight_between_window_changes(trace)
        for (t, before, after, peak) in series:
            if after <= before:
                continue
            check(peak is not None and peak >= UTILISED_FRACTION * before, "growth-while-app-limited", (
                f"{target.id}: cwnd grew {before} → {after} at t={t / 1e6:.3f} s while at most "
                f"{peak} bytes were in flight since the window was last set "
                f"(< {UTILISED_FRACTION:.0%} of it): the sender was application-limited "
                f"({len(PLAN.sizes)} objects of {PLAN.sizes[0]} bytes, {PLAN.think_ms} ms apart)"
            ), growth_bytes=after - before, inflight_share=(peak or 0) / before)


#: One bulk object: from its first datagram on, the sender always has data to send, so
#: only its window and its pacer hold it back.
BULK = TransferPlan(sizes=(2_000_000,))
#: Round trips of slow start judged from the first full datagram of data.
BULK_RTTS = 4
#: The least share of the bytes acknowledged the window must grow by while it is
#: within the path's BDP: no queue, so no rise of the RTT, so RFC 9406 allows no
#: conservative slow start yet, and slow start grows by all of them (RFC 9002
#: §7.3.1). The rest is slack for ACKs the capture shows before the log reports them.
BULK_GROWTH_PER_BYTE = 0.75


@example(schedule=strategies.CLEAN_DEEP_LINK)
@given(schedule=strategies.deep_clean())
def test_a_sender_with_data_grows_its_window_below_the_window(longlook, target, schedule):
    """RFC 9002 §7.8: a sender held back only by its pacer is not application limited.
    One bulk object on a clean, deep-queued link: over the first BULK_RTTS round trips
    from the sender's first full datagram of data, ended early by a declared loss, an
    exit from slow start or a window above the path's BDP (a queue, and with it a
    delay-based exit, may follow), the window grows by at least BULK_GROWTH_PER_BYTE of
    the bytes newly acknowledged, less one datagram, even while the flight stays below
    it. A sender that counts a pacer-held flight as application limited grows only on
    the ACKs that find its window full. Trigger: the flight was logged at least two
    datagrams below the window in that span, and four datagrams were acknowledged."""
    if target.cc.family not in BETA:
        outcomes.not_applicable(f"{target.cc.name} ({target.cc.family}) has no slow start rule here")
    outcomes.require(target, "congestion_window")
    with longlook.run(target, schedule, BULK) as obs:
        obs.completed()
        trace = obs.sender
        mss = analysis.max_datagram(trace)
        start = next((p.t_us for p in trace.of(PacketSent)
                      if p.space == "application" and p.size is not None and p.size >= 0.9 * mss), None)
        if start is None:
            outcomes.not_exercised("the sender logged no full datagram of data")
        windows = [(m.t_us, m.congestion_window, m.bytes_in_flight) for m in trace.of(Metrics)
                   if m.congestion_window is not None]
        link = schedule.phases[0].s2c
        bdp = link.rate_bps * 2 * link.delay_us // 8_000_000
        # What ends the span, earliest first: its round trips, a loss, an exit, the BDP.
        end, why = min([(start + BULK_RTTS * 2 * link.delay_us, f"{BULK_RTTS} round trips"),
                        *((l.t_us, "a declared loss") for l in analysis.losses(trace) if l.t_us > start),
                        *((s.t_us, f"an exit to {s.state}") for s in analysis.states(trace, BETA[target.cc.family])
                          if s.t_us > start and s.state in EXITS),
                        *((t, f"a window above the path's BDP ({bdp} B)") for t, w, _ in windows
                          if t > start and w > bdp)])
        before = next((w for t, w, _ in reversed(windows) if t <= start), windows[0][1] if windows else None)
        inside = [(w, f) for t, w, f in windows if start < t <= end]
        held = [(w, f) for w, f in inside if f is not None and f <= w - 2 * mss]
        if before is None or not held:
            outcomes.not_exercised(f"the flight was never logged two datagrams below the window in the "
                                   f"{(end - start) / 1e3:.0f} ms after the first full datagram (ended by {why})")
        try:
            acked = analysis.bytes_newly_acknowledged(obs.wire, start, end)
        except Inconclusive as e:
            outcomes.not_exercised(f"the capture could not be read for the bytes acknowledged: {e}")
        if acked < 4 * mss:
            outcomes.not_exercised(f"under 4 datagrams acknowledged in the {(end - start) / 1e3:.0f} ms after "
                                   f"the first full datagram (ended by {why})")
        grown = max((w for w, _ in inside), default=before) - before
        check(grown >= BULK_GROWTH_PER_BYTE * acked - mss, "no-growth-below-window", lambda: (
            f"{target.id}: from t={start / 1e6:.4f} s to {end / 1e6:.4f} s the window grew by {grown} B (from "
            f"{before} B) while {acked} B of one bulk object were newly acknowledged; the flight was at least two "
            f"datagrams below the window in {len(held)} of {len(inside)} reports (e.g. {held[0][1]} of "
            f"{held[0][0]} B): a sender with a bulk object to send is not application limited, whether its pacer "
            f"or a window it cannot fill with whole datagrams held it below the window (RFC 9002 §7.8), and within "
            f"the path's BDP ({bdp} B) slow start grows by the bytes acknowledged"
        ), growth_per_byte=grown / acked)
