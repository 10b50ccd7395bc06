"""State inference (harness.observe.states) and its comparison with logged states.

Synthetic traces come from a small NewReno sender (RFC 9002 Appendix B) simulated
over a fixed path and logging the way quic-go does (metrics after every send and ACK,
no ssthresh unless asked); one rule per test. The real-trace tests strip the states
quic-go and picoquic logged in tests/fixtures/qlog and require ≥ 95 % agreement.
"""

from __future__ import annotations

import heapq
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.observe.events import (
    STATES, CongestionState, Metrics, PacketAcked, PacketLost, PacketSent, PtoExpired, Trace,
)
from harness.observe.state_compare import COARSE, LOGGED_VOCABULARY, agreement, disagreements
from harness.observe.states import explain_states, infer_states, strip_states

MSS = 1200
RTT = 40_000  # µs
FIXTURES = Path(__file__).parent / "fixtures" / "qlog"
ENDPOINTS = Path(__file__).parents[1] / "harness" / "endpoints"


class NewRenoSim:
    """A NewReno sender (RFC 9002 Appendix B) of full-size packets over a fixed path,
    logging like quic-go: metrics after every send and every ACK, no ssthresh unless
    asked. One packet leaves the bottleneck every ``gap_us``; its ACK arrives RTT later;
    losses are declared by the packet threshold (3) [§6.1.1]; the window does not grow
    while under-utilised [§7.8]."""

    def __init__(self, packets: int, lose, pause, beta: float, log_ssthresh: bool, gap_us: float):
        self.packets, self.lose, self.pause, self.beta = packets, set(lose), pause, beta
        self.log_ssthresh, self.gap_us = log_ssthresh, gap_us
        self.cwnd, self.ssthresh, self.bif, self.next_pn = 10 * MSS, math.inf, 0, 0
        self.recovery_start, self.link_free = -1.0, 0.0
        self.sent: dict[int, float] = {}
        self.outstanding: set[int] = set()
        self.ev: list = []
        self.heap: list[tuple[float, int]] = [(pause[1], -1)] if pause else []  # -1: the app resumes

    def metrics(self, t: float) -> None:
        ss = int(self.ssthresh) if self.log_ssthresh and self.ssthresh < math.inf else None
        self.ev.append(Metrics(t, congestion_window=int(self.cwnd), bytes_in_flight=self.bif, ssthresh=ss,
                               smoothed_rtt_us=RTT, latest_rtt_us=RTT + (t % 7)))

    def send(self, t: float) -> None:
        paused = self.pause and self.pause[0] <= t < self.pause[1]
        while self.bif + MSS <= self.cwnd and self.next_pn < self.packets and not paused:
            pn, self.next_pn, self.bif = self.next_pn, self.next_pn + 1, self.bif + MSS
            self.sent[pn] = t
            self.outstanding.add(pn)
            self.ev.append(PacketSent(t, pn, size=MSS, ack_eliciting=True))
            self.metrics(t)
            self.link_free = max(t, self.link_free) + self.gap_us
            if pn not in self.lose:
                heapq.heappush(self.heap, (self.link_free + RTT, pn))

    def on_ack(self, t: float, pn: int) -> None:
        prior = self.bif
        self.outstanding.discard(pn)
        self.bif -= MSS
        self.ev.append(PacketAcked(t, pn))
        for old in sorted(p for p in self.outstanding if p <= pn - 3):
            self.outstanding.discard(old)
            self.bif -= MSS
            self.ev.append(PacketLost(t, old, trigger="reordering_threshold"))
            if self.sent[old] > self.recovery_start:  # OnCongestionEvent [B.6]
                self.recovery_start, self.ssthresh = t, max(self.cwnd * self.beta, 2 * MSS)
                self.cwnd = self.ssthresh
        slow = self.cwnd < self.ssthresh
        if self.sent[pn] > self.recovery_start and prior >= (self.cwnd / 2 if slow else self.cwnd - 3 * MSS):
            self.cwnd += MSS if slow else MSS * MSS / self.cwnd
        self.metrics(t)

    def run(self) -> Trace:
        self.send(0.0)
        while self.heap:
            t, pn = heapq.heappop(self.heap)
            if pn in self.outstanding:
                self.on_ack(t, pn)
            self.send(t)
        return Trace("sim", "server", self.ev, "simulated")


def simulate(packets: int, *, lose: tuple[int, ...] = (), pause: tuple[float, float] | None = None,
             beta: float = 0.5, log_ssthresh: bool = False, gap_us: float = 1000) -> Trace:
    """The trace of a NewRenoSim sending ``packets``; ``lose`` are dropped once and the
    application has nothing to send during ``pause`` (µs)."""
    return NewRenoSim(packets, lose, pause, beta, log_ssthresh, gap_us).run()


def names(states) -> list[str]:
    return [s.state for s in states]


def test_slow_start_then_loss_recovery_then_avoidance():
    """§7.3.1 → §7.3.2 → §7.3.3: recovery from the loss until a packet sent after it is ACKed."""
    trace = simulate(400, lose=(60,))
    states = infer_states(trace, beta=0.5, mss=MSS)
    assert names(states) == ["SlowStart", "Recovery", "CongestionAvoidance", "ApplicationLimited"], states
    assert states[3].t_us > trace.of(PacketSent)[-1].t_us, "app-limited only when the data ran out"
    assert all(s.inferred and s.raw is None for s in states)
    loss = trace.of(PacketLost)[0]
    assert states[1].t_us == loss.t_us, "recovery is dated at the loss declaration"
    boundary = max(e.pn for e in trace.of(PacketSent) if e.t_us <= loss.t_us)
    exit_ack = min(e.t_us for e in trace.of(PacketAcked) if e.pn > boundary)
    assert states[2].t_us == exit_ack


def test_recovery_dated_at_the_loss_when_the_window_is_logged_later():
    """quic-go logs the reduced window only at the next ACK, ~20 ms after the loss."""
    ev = [Metrics(0, congestion_window=80_000, bytes_in_flight=70_000),
          PacketLost(112_000, 35), Metrics(131_000, congestion_window=56_000, bytes_in_flight=69_000)]
    states = infer_states(Trace("t", "server", ev, "-"), beta=0.7, mss=MSS)
    assert [(s.t_us, s.state) for s in states] == [(0, "SlowStart"), (112_000, "Recovery")]


@pytest.mark.parametrize("ratio,recovery", [(0.7, True), (0.78, True), (0.97, False)])
def test_reduction_without_a_logged_loss_counts_near_beta(ratio, recovery):
    """quiche logs no packet_lost: a cut to ≈ β·cwnd is a congestion response, rounding is not."""
    ev = [Metrics(0, congestion_window=100_000, bytes_in_flight=90_000),
          Metrics(50_000, congestion_window=int(100_000 * ratio), bytes_in_flight=80_000)]
    states = infer_states(Trace("t", "server", ev, "-"), beta=0.7, mss=MSS)
    assert ("Recovery" in names(states)) == recovery


def test_losses_of_packets_sent_before_recovery_do_not_restart_it():
    """§7.3.2 / B.8: one reduction per round trip."""
    trace = simulate(400, lose=(60, 62, 65))
    states = infer_states(trace, beta=0.5, mss=MSS)
    assert names(states).count("Recovery") == 1


def test_logged_ssthresh_decides_slow_start_against_avoidance():
    trace = simulate(600, lose=(60,), log_ssthresh=True)
    states = names(infer_states(trace, beta=0.5, mss=MSS))
    assert states == ["SlowStart", "Recovery", "CongestionAvoidance", "ApplicationLimited"]


def test_application_limited_while_the_app_pauses():
    """§7.8: ACKs with little in flight and no growth; growth resumes after the pause."""
    trace = simulate(300, pause=(200_000, 400_000))
    inferred = explain_states(trace, beta=0.5, mss=MSS)
    al = [i for i in inferred if i.state.state == "ApplicationLimited"]
    assert al, [(i.state.t_us, i.state.state) for i in inferred]
    assert 200_000 < al[0].state.t_us < 200_000 + 2 * RTT
    after = [i.state.state for i in inferred if i.state.t_us > 400_000]
    assert after and after[0] in ("SlowStart", "CongestionAvoidance")


def test_slow_start_ends_without_loss_when_the_window_stalls():
    """HyStart-style exit (RFC 9406) with no ssthresh logged: cwnd-limited ACKs, no growth."""
    bif = 40_000
    ev = [Metrics(0, congestion_window=40_000, bytes_in_flight=bif)]
    for i in range(40):  # ACK clocked, window full, never grows
        t = RTT + i * 1000
        ev += [Metrics(t, congestion_window=40_000, bytes_in_flight=bif - MSS, latest_rtt_us=RTT + i),
               Metrics(t + 10, congestion_window=40_000, bytes_in_flight=bif)]
    states = infer_states(Trace("t", "server", ev, "-"), beta=0.7, mss=MSS)
    assert names(states) == ["SlowStart", "CongestionAvoidance"]
    # A stack that logs ssthresh whenever it sets it (ngtcp2) has logged none here: its
    # ssthresh is still infinite, and the stall is no exit from slow start.
    assert names(infer_states(Trace("ngtcp2", "server", ev, "-"), beta=0.7, mss=MSS)) == ["SlowStart"]
    # Nor for one that sets it only at a reduction (kwik's NewReno, no HyStart): its
    # stall is its application-limited rule.
    assert names(infer_states(Trace("kwik", "server", ev, "-"), beta=0.5, mss=MSS)) == ["SlowStart"]


def test_window_at_its_maximum_for_many_rtts_is_maxed():
    """Kakhki et al.: a window cap (Chromium's 107 packets) shows as CongestionAvoidanceMaxed."""
    ev = [Metrics(0, congestion_window=50_000, bytes_in_flight=0, smoothed_rtt_us=RTT, ssthresh=40_000),
          Metrics(1000, congestion_window=60_000, bytes_in_flight=58_000)]
    for i in range(400):
        t = 2000 + i * 1000
        ev += [Metrics(t, bytes_in_flight=58_000 - MSS, latest_rtt_us=RTT + i),
               Metrics(t + 10, bytes_in_flight=58_000)]
    states = infer_states(Trace("t", "server", ev, "-"), beta=0.7, mss=MSS)
    assert names(states)[-1] == "CongestionAvoidanceMaxed"
    assert states[-1].t_us == 1000, "dated from when the window reached the cap"


def pto_trace(*counts: int, collapse: bool = False) -> Trace:
    ev = [Metrics(0, congestion_window=60_000, bytes_in_flight=50_000, ssthresh=30_000),
          PacketSent(10, 1, size=MSS)]
    t = 100_000
    for c in counts:
        ev.append(PtoExpired(t, c))
        ev.append(PacketSent(t + 1, 100 + c, size=MSS))
        t += 200_000
    last = 100 + counts[-1]
    if collapse:
        ev += [PacketLost(t, 1), Metrics(t, congestion_window=2 * MSS, bytes_in_flight=0), PacketSent(t + 1, 500)]
        last = 500
    ev.append(PacketAcked(t + 50_000, last))
    return Trace("t", "server", ev, "-")


def test_first_pto_is_a_tail_loss_probe_and_the_ack_ends_it():
    """§6.2: pto_count 1 → TailLossProbe; an ACK of the probe resets the backoff (§6.2.1)."""
    states = infer_states(pto_trace(1), beta=0.5, mss=MSS)
    assert names(states) == ["CongestionAvoidance", "TailLossProbe", "CongestionAvoidance"]


def test_second_pto_is_a_retransmission_timeout():
    states = infer_states(pto_trace(1, 2), beta=0.5, mss=MSS)
    assert names(states) == ["CongestionAvoidance", "TailLossProbe", "RetransmissionTimeout", "CongestionAvoidance"]


def test_collapse_to_minimum_window_is_rto_over_slow_start():
    """§7.6.2 persistent congestion: RetransmissionTimeout shown, slow start beneath."""
    inferred = explain_states(pto_trace(1, collapse=True), beta=0.5, mss=MSS)
    rto = [i for i in inferred if i.state.state == "RetransmissionTimeout"]
    assert rto and rto[0].base == "SlowStart"
    assert inferred[-1].state.state == "SlowStart"


def test_pto_count_rise_in_metrics_counts_as_pto():
    ev = [Metrics(0, congestion_window=30_000, bytes_in_flight=20_000), Metrics(300_000, pto_count=1),
          Metrics(700_000, pto_count=2)]
    states = infer_states(Trace("t", "server", ev, "-"), beta=0.5, mss=MSS)
    assert names(states) == ["SlowStart", "TailLossProbe", "RetransmissionTimeout"]


def test_strip_states_keeps_everything_else_and_leaves_the_original():
    trace = simulate(50)
    trace.events.insert(0, CongestionState(0, "SlowStart", raw="slow_start"))
    stripped = strip_states(trace)
    assert not stripped.of(CongestionState) and trace.of(CongestionState)
    assert len(stripped.events) == len(trace.events) - 1 and stripped.stack == trace.stack


def cs(*pairs) -> list[CongestionState]:
    return [CongestionState(t, s) for t, s in pairs]


def test_agreement_is_the_fraction_of_time_in_the_same_coarse_state():
    logged = cs((0, "SlowStart"), (100, "CongestionAvoidance"))
    assert agreement(logged, logged, end_us=200) == 1.0
    assert agreement(logged, cs((0, "SlowStart"), (150, "CongestionAvoidance")), end_us=200) == pytest.approx(0.75)
    assert disagreements(logged, cs((0, "SlowStart"), (150, "CongestionAvoidance")), end_us=200) == [
        (100, 150, "CongestionAvoidance", "SlowStart")]
    maxed = cs((0, "SlowStart"), (100, "CongestionAvoidanceMaxed"))
    assert agreement(logged, maxed, end_us=200) == 1.0, "Maxed is avoidance in the coarse set"


def test_agreement_maps_what_a_stack_cannot_log():
    """picoquic logs no Recovery: inferred Recovery counts as avoidance; PTOs as the state before."""
    logged = cs((0, "SlowStart"), (100, "CongestionAvoidance"))
    inferred = cs((0, "SlowStart"), (100, "Recovery"), (150, "TailLossProbe"), (170, "CongestionAvoidance"))
    assert agreement(logged, inferred, end_us=200) == pytest.approx(0.65)
    assert agreement(logged, inferred, end_us=200, vocabulary=("SlowStart", "CongestionAvoidance")) == 1.0
    late = cs((100, "CongestionAvoidance"))  # picoquic logs only changes: slow start before
    assert agreement(late, cs((0, "SlowStart"), (100, "CongestionAvoidance")), end_us=200) == 1.0


@pytest.mark.parametrize("call", [
    lambda: agreement(cs((5, "SlowStart")), cs((5, "SlowStart"))),
    lambda: agreement(cs((0, "SlowStart")), cs((0, "Bogus")), end_us=9),
    lambda: agreement(cs((0, "SlowStart")), cs((0, "SlowStart")), end_us=9, vocabulary=("Recovery",)),
])
def test_agreement_errors_name_the_problem(call):
    with pytest.raises(ValueError):
        call()


sizes = st.one_of(st.none(), st.integers(0, 10**7))
rtts = st.one_of(st.none(), st.floats(0, 1e6))
events = st.one_of(
    st.builds(Metrics, st.floats(0, 1e7), congestion_window=sizes, bytes_in_flight=sizes, ssthresh=sizes,
              smoothed_rtt_us=rtts, latest_rtt_us=rtts, pto_count=st.one_of(st.none(), st.integers(0, 5))),
    st.builds(PacketSent, st.floats(0, 1e7), st.integers(0, 50), size=sizes),
    st.builds(PacketAcked, st.floats(0, 1e7), st.integers(0, 50)),
    st.builds(PacketLost, st.floats(0, 1e7), st.integers(0, 50)),
    st.builds(PtoExpired, st.floats(0, 1e7), st.one_of(st.none(), st.integers(0, 5))),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(events, max_size=60), st.sampled_from([None, 0.5, 0.7]))
def test_inference_never_fails_on_odd_traces(evs, beta):
    """Truncated or odd traces (zero windows, no ssthresh, PTO storms) give well-formed states."""
    out = explain_states(Trace("x", "server", evs, "-"), beta=beta, mss=MSS)
    assert [i.state.t_us for i in out] == sorted(i.state.t_us for i in out)
    assert all(i.state.state in STATES and i.base in STATES and i.state.inferred for i in out)
    assert all(a.state.state != b.state.state or a.base != b.base for a, b in zip(out, out[1:]))


# -- real traces -------------------------------------------------------------------------


def fixture_runs(stack: str) -> list[Path]:
    return sorted(p for p in (FIXTURES / stack).glob("*") if (p / "result.json").exists())


def real_case(stack: str):
    """(trace of the data sender, beta, mss) per fixture run of ``stack``; skip if absent."""
    qlog = pytest.importorskip("harness.observe.qlog", reason="the qlog reader is not there yet")
    runs = fixture_runs(stack)
    if not runs:
        pytest.skip(f"no fixtures under {FIXTURES / stack}")
    caps = json.loads((ENDPOINTS / stack / "caps.json").read_text())
    for run in runs:
        cc = json.loads((run / "result.json").read_text()).get("cc") or caps["default_cc"]
        for trace in qlog.read_run(run, stack)["server"]:
            mss = max(e.size for e in trace.of(PacketSent) if e.size)
            yield run, trace, caps["cc"][cc]["beta"], mss


@pytest.mark.parametrize("stack", ["quic-go", "picoquic"])
def test_inferred_states_agree_with_logged_ones_on_real_traces(stack):
    """Issue 4's bar: with quic-go's and picoquic's logged states stripped, the inferred
    ones agree ≥ 95 % of the time (in what each stack can log: LOGGED_VOCABULARY)."""
    for run, trace, beta, mss in real_case(stack):
        logged = trace.of(CongestionState)
        assert logged, f"{run}: the fixture has no logged states"
        inferred = explain_states(strip_states(trace), beta=beta, mss=mss)
        end = max(e.t_us for e in trace.events)
        score = agreement(logged, inferred, end_us=end, vocabulary=LOGGED_VOCABULARY[stack])
        gaps = disagreements(logged, inferred, end_us=end, vocabulary=LOGGED_VOCABULARY[stack])
        assert score >= 0.95, f"{run}: agreement {score:.3f} < 0.95; differing: {gaps[:8]}"


def test_quic_go_agrees_in_the_full_coarse_set():
    """quic-go logs all four coarse states, so its vocabulary is the full set."""
    assert LOGGED_VOCABULARY["quic-go"] == COARSE
    for run, trace, beta, mss in real_case("quic-go"):
        inferred = explain_states(strip_states(trace), beta=beta, mss=mss)
        end = max(e.t_us for e in trace.events)
        assert agreement(trace.of(CongestionState), inferred, end_us=end) >= 0.95, run


@pytest.mark.parametrize("stack", ["aioquic", "quinn", "quiche", "tquic", "s2n-quic"])
def test_inference_runs_on_every_stack(stack):
    """Stacks without (usable) logged states still get a plausible state sequence."""
    for run, trace, beta, mss in real_case(stack):
        states = infer_states(trace, beta=beta, mss=mss)
        assert states and states[0].state == "SlowStart", run
        assert all(s.inferred for s in states)
        assert [s.t_us for s in states] == sorted(s.t_us for s in states)
