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
    _quinn("mutant-beta-0.9", "β = 0.9 (NewRenoConfig::loss_reduction_factor)"),
    _quinn("mutant-reduce-every-loss", "a reduction on every loss, recovery period ignored"),
    _quinn("mutant-persistent-congestion-ignored", "persistent congestion ignored"),
    _quinn("mutant-app-limited-growth", "window growth while application-limited", APP_LIMITED),
)


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
