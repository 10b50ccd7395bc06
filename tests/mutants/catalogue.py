"""The mutant zoo's catalogue: every mutant `make mutants` runs, and the stock
controller each one is a mutant of (whose verdicts define a kill).

The properties never see this list; it only tells scripts/mutants.py what to run.
aioquic mutants are classes in this package, loaded by import path; quinn mutants
are entries of the quinn endpoint's controller registry
(harness/endpoints/rust/quinn-endpoint/src/cc.rs), selected by name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    stack: str
    #: What --cc gets: module:Class for aioquic, a registry name for quinn.
    cc: str
    #: The stock controller it mutates; a kill is a property this one passes.
    stock: str
    bug: str
    #: The property whose rule the bug breaks, where naming it matters: a mutant
    #: that survives is "equivalent" only when its stock fails this very property
    #: (the stock has the bug already), never because it shares another of the
    #: stock's failures, which every subclass of the stock inherits.
    bug_property: str | None = None


def _aioquic(module: str, cls: str, stock: str, bug: str, prop: str | None = None) -> Mutant:
    return Mutant(module, "aioquic", f"tests.mutants.{module}:{cls}", stock, bug, prop)


def _quinn(name: str, bug: str, prop: str | None = None) -> Mutant:
    return Mutant(f"quinn/{name.removeprefix('mutant-')}", "quinn", name, "newreno", bug, prop)


APP_LIMITED = "properties/test_app_limited.py::test_no_window_growth_while_application_limited"


MUTANTS: tuple[Mutant, ...] = (
    _aioquic("packet_threshold_one", "PacketThresholdOne", "newreno", "kPacketThreshold 1: reordering read as loss"),
    _aioquic("packet_threshold_ten", "PacketThresholdTen", "newreno", "kPacketThreshold 10: losses declared late"),
    _aioquic("no_reduction_on_loss", "NoReductionOnLoss", "newreno", "no window reduction on loss"),
    _aioquic("halve_every_loss", "HalveEveryLoss", "newreno", "a reduction on every loss, recovery period ignored"),
    _aioquic("minimum_window_one_packet", "MinimumWindowOnePacket", "newreno", "minimum window of one datagram"),
    _aioquic("app_limited_growth", "AppLimitedGrowth", "newreno", "window growth while application-limited",
             APP_LIMITED),
    _aioquic("window_cap_107", "WindowCap107", "newreno", "window capped at 107 datagrams (MACW)"),
    _aioquic("ssthresh_never_set", "SsthreshNeverSet", "newreno", "ssthresh not set on loss: slow start resumes"),
    _aioquic("pacing_1ms", "Pacing1ms", "newreno", "1 ms pacer, one datagram per tick"),
    _aioquic("no_pacing", "NoPacing", "newreno", "no pacer: what an ACK opens leaves at once"),
    _aioquic("cubic_two_flows", "CubicTwoFlows", "cubic", "CUBIC emulating two flows (β 0.85)"),
    _aioquic("persistent_congestion_ignored", "PersistentCongestionIgnored", "newreno",
             "persistent congestion ignored"),
    _aioquic("beta_0_9", "Beta09", "newreno", "β = 0.9"),
    _aioquic("slow_start_never_exits", "SlowStartNeverExits", "newreno", "slow start never exits"),
    _aioquic("half_slow_start", "HalfSlowStart", "newreno", "slow start grows by half the bytes acknowledged"),
    _aioquic("slow_start_capped_per_ack", "SlowStartCappedPerAck", "newreno",
             "slow start adds at most two datagrams per ACK (L = 2)"),
    _aioquic("cubic_reduce_every_loss", "CubicReduceEveryLoss", "cubic", "CUBIC reducing on every loss"),
    # Planted for the properties written after the first scored zoo (each has its own
    # test in tests/test_new_properties.py and beside it); scored here with the rest,
    # so that every property, not only the one it was written for, may kill it.
    _aioquic("collapse_on_every_loss", "CollapseOnEveryLoss", "newreno",
             "every congestion event taken for persistent congestion"),
    _aioquic("cut_at_recovery_end", "CutAtRecoveryEnd", "newreno", "the cut held back until the recovery period ends"),
    _aioquic("cuts_without_loss", "CutsWithoutLoss", "newreno", "two halvings with no loss behind them"),
    _aioquic("stuck_in_recovery", "StuckInRecovery", "newreno", "a recovery period that never ends"),
    _aioquic("ignores_every_second_loss", "IgnoresEverySecondLoss", "newreno",
             "every second lost packet dropped quietly, left in flight"),
    _aioquic("paced_as_app_limited", "PacedAsAppLimited", "newreno", "a flight the pacer holds counts as app-limited"),
    _aioquic("pc_before_first_sample", "PcBeforeFirstSample", "newreno",
             "losses before the first RTT sample count toward persistent congestion"),
    _aioquic("delay_exit_every_slow_start", "DelayExitEverySlowStart", "newreno",
             "a delay-based exit in every slow start, not only the first"),
    _aioquic("early_time_threshold", "EarlyTimeThreshold", "newreno", "time threshold 9/32 RTT with no floor"),
    _aioquic("late_time_threshold", "LateTimeThreshold", "newreno", "time threshold 2.5 RTT"),
    _aioquic("no_loss_timer", "NoLossTimer", "newreno", "no loss timer: time-threshold losses wait for an ACK"),
    _aioquic("pto_without_granularity", "PtoWithoutGranularity", "newreno", "PTO period without the kGranularity floor"),
    _aioquic("two_idle_probes", "TwoIdleProbes", "newreno", "two probes for every PTO, PINGs when idle"),
    _aioquic("ack_only_probes", "AckOnlyProbes", "newreno", "every other PTO probe ACK-only, not ack-eliciting"),
    _aioquic("probe_burst_of_five", "ProbeBurstOfFive", "newreno", "PTO bursts of up to five datagrams"),
    _aioquic("probes_not_in_flight", "ProbesNotInFlight", "newreno", "probes past the window left out of bytes in flight"),
    _aioquic("sends_beyond_window", "SendsBeyondWindow", "newreno", "window check off by four datagrams"),
    _aioquic("acks_paced", "AcksPaced", "newreno", "ACKs wait for the pacer's release"),
    _aioquic("no_anti_deadlock_probe", "NoAntiDeadlockProbe", "newreno",
             "client arms no probe timer with nothing in flight before its Handshake is acknowledged"),
    _aioquic("amplification_twice", "AmplificationTwice", "newreno",
             "server counts received bytes twice toward its amplification budget"),
    _aioquic("crypto_resend_unlimited", "CryptoResendUnlimited", "newreno",
             "CRYPTO resent early on every duplicate ClientHello"),
    _aioquic("ack_delay_uncapped", "AckDelayUncapped", "newreno",
             "a peer's whole ACK Delay subtracted, past its max_ack_delay"),
    _aioquic("cubic_alpha_never_one", "CubicAlphaNeverOne", "cubic", "Reno-friendly α stays ≈ 0.53, never 1"),
    _aioquic("cubic_c_ten_times", "CubicCTenTimes", "cubic", "CUBIC C = 4"),
    _aioquic("cubic_clock_through_idle", "CubicClockThroughIdle", "cubic",
             "CUBIC's clock runs through application-limited pauses"),
    _aioquic("cubic_late_undo", "CubicLateUndo", "cubic", "a cut undone however late its loss proves spurious"),
    _aioquic("cubic_no_delay_exit", "CubicNoDelayExit", "cubic", "CUBIC without a delay-based slow start exit"),
    _aioquic("cubic_no_fast_convergence", "CubicNoFastConvergence", "cubic", "CUBIC without fast convergence"),
    _aioquic("cubic_undo_every_cut", "CubicUndoEveryCut", "cubic", "every cut undone a round trip later"),
    _aioquic("no_reno_friendly", "NoRenoFriendly", "cubic", "CUBIC without its Reno-friendly region"),
    _aioquic("no_slow_start", "NoSlowStart", "cubic", "CUBIC that starts in congestion avoidance"),
    _quinn("mutant-beta-0.9", "β = 0.9 (NewRenoConfig::loss_reduction_factor)"),
    _quinn("mutant-reduce-every-loss", "a reduction on every loss, recovery period ignored"),
    _quinn("mutant-persistent-congestion-ignored", "persistent congestion ignored"),
    _quinn("mutant-app-limited-growth", "window growth while application-limited", APP_LIMITED),
)


#: Modules of this package that plant a controller the zoo does not score, and why.
#: tests/test_mutants.py holds every other controller module to a catalogue entry.
NOT_SCORED: dict[str, str] = {
    "cubic_restart_after_pc": "not a bug: RFC 9438 §4.8 planted into aioquic, which lacks it (F90)",
    "min_rtt_reset_after_pc": "not a bug: RFC 9002 §5.2's min_rtt reset planted into aioquic",
    "ack_delay_uncapped_until_confirmed": "not a bug: RFC 9002 §5.3's uncapped ACK Delay before confirmation "
                                          "planted into aioquic, which lacks it (F109)",
    "cubic_clock_stops_when_idle": "not a bug: RFC 9438 §4.2's clock stopped in a pause planted into aioquic, "
                                   "which lacks it (F110)",
    "reno_called_bbr": "no stock: aioquic has no BBR whose verdicts would define a kill; "
                       "tests/test_bbr_properties.py holds every BBR property to failing it",
}


def impairment_events(schedule: dict) -> int:
    """How many impairments a schedule (its JSON form) holds: each per-packet action,
    each impairment a phase's link settings switch on (loss model, jitter,
    duplication, corruption, blackhole), and each later phase whose rate, delay or
    queue differs from the first phase's (a rate drop and its recovery are one).
    The clean link is 0."""
    phases = schedule.get("phases", [])
    count = len(schedule.get("actions", []))
    first = phases[0] if phases else {}
    for i, phase in enumerate(phases):
        for direction in ("c2s", "s2c"):
            s = phase.get(direction) or {}
            count += sum(1 for key in ("loss", "jitter_us", "duplicate", "corrupt", "blackhole") if s.get(key))
            base = first.get(direction) or {}
            if i and not s.get("blackhole") and any(
                    s.get(k) != base.get(k) for k in ("rate_bps", "delay_us", "queue_bytes", "queue_packets")):
                count += 1
    return count
