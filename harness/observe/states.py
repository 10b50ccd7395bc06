"""Congestion states inferred from what every stack logs: window, ssthresh, losses, PTOs.

aioquic and quinn log no congestion states; quic-go, picoquic and quiche do, each in
its own words. `infer_states` derives the model's states (events.STATES) from metrics,
losses and PTOs alone, so every stack gets the same view; `strip_states` and
`agreement` (harness.observe.state_compare) check it against the stacks that log
states. Every inferred state has ``inferred=True``. Times µs, sizes bytes. The rules
(RFC 9002 sections in brackets):

- **SlowStart** at the start: ssthresh starts infinite [§7.3.1, B.3]. After a change
  of the window, the state is judged by where it lands: slow start while cwnd <
  ssthresh [§7.3.1], congestion avoidance at or above it [§7.3.3]. ssthresh is the
  logged one if any; else implied: infinite until the first reduction, then the
  reduced window [§7.3.2]. While it is unknown and infinite, growth of less than
  SS_GROWTH_RATIO per acknowledged byte over an RTT, or cwnd-limited ACKs of
  SS_STALL·cwnd without growth, mean slow start ended without a loss (HyStart,
  RFC 9406; quic-go logs no ssthresh), unless the stack logs ssthresh whenever it
  sets it, or sets it only at a reduction (Dialect.unset_ssthresh_is_infinite: ngtcp2,
  kwik), when none logged is infinite. The rate alone cannot tell avoidance: CUBIC
  grows faster than one datagram per RTT.
- **Recovery** starts at a window reduction within one smoothed RTT after a declared
  loss, dated at the loss (quic-go logs the new window only at the next ACK); without
  a declared loss (quiche logs none; ECN-CE) a reduction to at most (β + 0.1)·cwnd
  counts [§7.3.2]. Losses of packets sent before the start do not start another
  [§7.3.2, B.8]. It ends when a packet sent after its start is acknowledged [§7.3.2],
  or when the window grows (out of recovery by behaviour; §7.3.2 forbids growth in it);
  without packet events, at the first ACK a min_rtt after the first send in recovery.
- **ApplicationLimited** at an ACK that leaves the window unchanged while the bytes in
  flight before it were well below the window, which then SHOULD NOT grow [§7.8]:
  below cwnd/2 in slow start, below cwnd − 3·mss otherwise (§7.8 fixes no margin;
  quic-go and Linux use these). It lasts until the window moves or an ACK finds the
  sender cwnd-limited.
- **CongestionAvoidanceMaxed**: the window, at the largest value it ever had, unchanged
  for MAXED_RTTS smoothed RTTs of cwnd-limited ACKs: it sits at a cap (Kakhki et al.,
  IMC'17: Chromium's 107-packet maximum window). Dated from when it got there.
- **TailLossProbe** / **RetransmissionTimeout** overlay the state beneath from a PTO
  expiry (PtoExpired, or a rise of pto_count) until an ACK of a packet sent since
  [§6.2.1]: pto_count 1 is the tail loss probe, ≥ 2 the retransmission timeout. A
  collapse of the window to about kMinimumWindow is persistent congestion [§7.6.2]:
  RetransmissionTimeout over slow start.

Later evidence overrides earlier guesses: what was inferred after a loss is replaced
when the reduction it caused is logged later.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import math
from dataclasses import dataclass

from harness.observe.events import CongestionState, Metrics, PacketAcked, PacketLost, PacketSent, PtoExpired, Trace

# Re-exported: the comparison is part of this module's interface.
from harness.observe.state_compare import COARSE, LOGGED_VOCABULARY, agreement, disagreements

__all__ = ["COARSE", "LOGGED_VOCABULARY", "Inference", "agreement", "disagreements", "explain_states",
           "infer_states", "strip_states"]

#: Growth per acknowledged byte, over an RTT, from which growth is slow start: 1 in slow
#: start, 1/4 in HyStart++'s conservative slow start (RFC 9406), ≈ mss/cwnd in NewReno's
#: avoidance. Used only while ssthresh is unknown and still infinite.
SS_GROWTH_RATIO = 0.2
#: A reduction without a declared loss counts when cwnd_new ≤ (β + this)·cwnd_old.
BLIND_REDUCTION_SLACK = 0.1
#: After a declared loss, any reduction below this fraction of the window counts.
LOSS_REDUCTION_MAX = 0.95
#: Slow start has ended when cwnd-limited ACKs of this fraction of cwnd did not grow it
#: (single ACKs do: picoquic skips growth on a few while its HyStart samples the RTT).
SS_STALL = 0.25
#: Congestion avoidance is cwnd-limited while bytes in flight ≥ cwnd − this many mss.
BURST_PACKETS = 3
#: An unchanged, cwnd-limited window for this many smoothed RTTs sits at a cap.
MAXED_RTTS = 8
#: kMinimumWindow in datagrams [§7.2]; a window at most 1.25 times it has collapsed.
MIN_WINDOW_PACKETS = 2
#: ssthresh values at or above this are "infinite" (stacks log u64::MAX and the like).
INFINITE_SSTHRESH = 2**31


@dataclass(frozen=True)
class Inference:
    """One inferred state change, the evidence for it in words, and ``base``: the
    congestion controller's state beneath a PTO overlay (TailLossProbe or
    RetransmissionTimeout), else the state itself. `agreement` compares bases."""

    state: CongestionState
    why: str
    base: str


@dataclass
class _Recovery:
    start_us: float
    #: Largest application packet number sent at or before the start (-1: none).
    boundary_pn: int
    #: First time bytes in flight rose after the start (the fallback exit rule).
    first_send_us: float | None = None


def infer_states(trace: Trace, *, beta: float | None, mss: int) -> list[CongestionState]:
    """The congestion states of ``trace`` inferred from metrics, losses and PTOs.

    ``beta`` is the stack's multiplicative decrease (kLossReductionFactor, 0.5 NewReno,
    0.7 CUBIC; None for BBR and delay-based controllers: then only reductions after a
    declared loss mark recovery). ``mss`` is the max datagram size in bytes. Returns
    one CongestionState per change, time-ordered, all with ``inferred=True``; logged
    states in ``trace`` are ignored. The rules are in the module docstring.
    """
    out: list[CongestionState] = []
    for i in explain_states(trace, beta=beta, mss=mss):
        if not out or out[-1].state != i.state.state:  # base changes under an overlay are not changes
            out.append(i.state)
    return out


def explain_states(trace: Trace, *, beta: float | None, mss: int) -> list[Inference]:
    """Like `infer_states`, each state with the evidence that made it (for reports)."""
    if mss <= 0:
        raise ValueError(f"mss must be a positive number of bytes, got {mss}")
    walk = _Walk(trace, beta, mss)
    for event in sorted(trace.events, key=lambda e: e.t_us):
        walk.feed(event)
    return walk.out


def strip_states(trace: Trace) -> Trace:
    """A copy of ``trace`` without CongestionState events (to test the inference)."""
    kept = [e for e in trace.events if not isinstance(e, CongestionState)]
    return dataclasses.replace(trace, events=kept, notes=list(trace.notes))


class _Walk:
    """The inference as one pass over the events; `out` holds the result so far."""

    def __init__(self, trace: Trace, beta: float | None, mss: int):
        self.beta, self.mss = beta, mss
        # The ACK rules need both ends of a packet; without them, fallbacks on metrics.
        kinds = {type(e) for e in trace.events if getattr(e, "space", None) == "application"}
        self.has_acks = {PacketAcked, PacketSent} <= kinds
        self.cwnd: int | None = None  # bytes, as last logged; so are the next two
        self.bif: int | None = None
        self.logged_ssthresh: int | None = None
        # A stack that logs ssthresh when it sets it is in slow start until it does.
        from harness.observe import dialects

        self.ssthresh_logged_when_set = dialects.get(trace.stack).unset_ssthresh_is_infinite
        self.max_cwnd, self.implied_ssthresh = 0, math.inf
        self.latest_rtt = self.srtt = self.min_rtt = None
        self.base, self.overlay, self.overlay_since = "SlowStart", None, -math.inf
        self.recovery: _Recovery | None = None
        self.pending_loss: float | None = None  # time of a loss whose reduction is not yet logged
        self.sent_t: list[float] = []  # application packets: send times, and the
        self.sent_max_pn: list[int] = []  # largest pn sent up to each of them
        self.sent_at: dict[int, float] = {}
        self.pto_count = 0
        self.cwnd_limited = True  # at the latest ACK
        self.flat_since: float | None = None
        self.acked_flat = 0  # bytes acknowledged by cwnd-limited ACKs since the window last moved
        self.cum_acked = 0  # bytes acknowledged so far (from bytes_in_flight decreases)
        # (t_us, cum_acked, cwnd) at ACKs since the last reduction, app-limited ACK or recovery end
        self.samples: collections.deque[tuple[float, int, int]] = collections.deque()
        self.out: list[Inference] = []

    def shown(self) -> str:  # the overlay hides the state beneath it
        return self.overlay or self.base

    def emit(self, t_us: float, why: str, *, backdate: bool = False) -> None:
        """Record the shown state at ``t_us`` if it changed. ``backdate`` drops what was
        inferred after ``t_us``: evidence arriving now explains that period better."""
        if backdate:
            while self.out and self.out[-1].state.t_us > t_us:
                self.out.pop()
        t_us = max(t_us, self.out[-1].state.t_us) if self.out else t_us
        now = (self.shown(), self.base)
        if self.out and (self.out[-1].state.state, self.out[-1].base) == now:
            return
        if self.out and self.out[-1].state.t_us == t_us:
            self.out.pop()  # a zero-length state says nothing
            if self.out and (self.out[-1].state.state, self.out[-1].base) == now:
                return
        self.out.append(Inference(CongestionState(t_us, self.shown(), None, True), why, self.base))

    def feed(self, e) -> None:
        if not self.out:
            self.emit(e.t_us, "a sender begins in slow start (RFC 9002 §7.3.1)")
        if isinstance(e, Metrics):
            self.on_metrics(e)
        elif isinstance(e, PacketSent) and e.space == "application":
            self.sent_at[e.pn] = e.t_us
            self.sent_t.append(e.t_us)
            self.sent_max_pn.append(max(e.pn, self.sent_max_pn[-1]) if self.sent_max_pn else e.pn)
        elif isinstance(e, PacketAcked):
            self.on_acked(e)
        elif isinstance(e, PacketLost):
            self.on_lost(e)
        elif isinstance(e, PtoExpired):
            self.on_pto(e.t_us, e.pto_count if e.pto_count else self.pto_count + 1)

    def on_acked(self, e: PacketAcked) -> None:
        self.pto_count = 0
        sent = self.sent_at.get(e.pn) if e.space == "application" else None
        if self.overlay and e.t_us > self.overlay_since and (sent is None or sent >= self.overlay_since):
            self.end_overlay(e.t_us, f"ACK of {e.space} packet {e.pn}")
        r = self.recovery
        if r and self.has_acks and e.space == "application" and e.pn > r.boundary_pn:
            self.end_recovery(e.t_us, f"packet {e.pn}, sent after recovery began, acknowledged (§7.3.2)")

    def on_lost(self, e: PacketLost) -> None:
        sent = self.sent_at.get(e.pn) if e.space == "application" else None
        r = self.recovery
        if self.pending_loss is None and (r is None or (sent is not None and sent > r.start_us)):
            self.pending_loss = e.t_us

    def on_pto(self, t_us: float, count: int) -> None:
        self.pto_count = count
        self.overlay = "TailLossProbe" if count <= 1 else "RetransmissionTimeout"
        self.overlay_since = t_us
        self.emit(t_us, f"PTO expired, pto_count {count} (§6.2)")

    def end_overlay(self, t_us: float, what: str) -> None:
        """A PTO episode or a collapse ends with the first ACK for something sent since
        (§6.2.1 resets the backoff on any ACK; one for an older packet, logged a few µs
        after the collapse it caused, says nothing about the path since)."""
        self.overlay = None
        self.emit(t_us, f"{what} ends the PTO episode (§6.2.1)")

    def on_metrics(self, m: Metrics) -> None:
        prior_bif = self.bif
        ack = self.is_ack(m, prior_bif)
        acked = max(0, prior_bif - m.bytes_in_flight) if ack and None not in (prior_bif, m.bytes_in_flight) else 0
        self.cum_acked += acked
        self.note_rtts(m)
        if m.pto_count is not None and m.pto_count > self.pto_count:
            self.on_pto(m.t_us, m.pto_count)
        elif self.overlay and ack and not self.has_acks and m.t_us > self.overlay_since:
            self.end_overlay(m.t_us, "an ACK (no packet events)")
        if m.ssthresh is not None:
            self.logged_ssthresh = m.ssthresh
        changed = False
        if m.congestion_window is not None:
            changed = self.on_window(m, acked)
        if m.bytes_in_flight is not None:
            self.note_send_in_recovery(m)
            self.bif = m.bytes_in_flight
        if ack and not changed:
            self.on_ack_unchanged(m.t_us, prior_bif, acked)
        if ack and self.cwnd is not None:
            self.samples.append((m.t_us, self.cum_acked, self.cwnd))

    def is_ack(self, m: Metrics, prior_bif: int | None) -> bool:
        """Whether this update follows an ACK: a new RTT sample, or fewer bytes in flight
        (qlog has no 'ACK processed' event, and PacketAcked may be logged after the
        metrics it caused)."""
        new_sample = m.latest_rtt_us is not None and m.latest_rtt_us != self.latest_rtt
        fewer = m.bytes_in_flight is not None and prior_bif is not None and m.bytes_in_flight < prior_bif
        return new_sample or fewer

    def note_rtts(self, m: Metrics) -> None:
        for mine, theirs in (("latest_rtt", m.latest_rtt_us), ("srtt", m.smoothed_rtt_us), ("min_rtt", m.min_rtt_us)):
            if theirs is not None:
                setattr(self, mine, theirs)

    def note_send_in_recovery(self, m: Metrics) -> None:
        """Fallback exit rule for traces without packet events (see module docstring)."""
        r = self.recovery
        if r is None or self.has_acks or self.bif is None:
            return
        if r.first_send_us is None and m.bytes_in_flight > self.bif and m.t_us >= r.start_us:
            r.first_send_us = m.t_us
        rtt = self.min_rtt or self.srtt
        if r.first_send_us is not None and rtt and m.bytes_in_flight < self.bif and m.t_us - r.first_send_us >= rtt:
            self.end_recovery(m.t_us, "an ACK one min_rtt after the first send in recovery (no packet events)")

    def on_window(self, m: Metrics, acked: int) -> bool:
        """Handle a logged cwnd (``acked``: bytes this update acknowledged); True if it changed."""
        old, new = self.cwnd, m.congestion_window
        self.cwnd, self.max_cwnd = new, max(new, self.max_cwnd)
        if old is None and self.base == "SlowStart" and new >= self.ssthresh():
            self.base = "CongestionAvoidance"  # a trace that starts late (e.g. cut at the front)
            self.emit(m.t_us, f"first cwnd {new} B ≥ ssthresh {self.ssthresh()} B (§7.3.3)")
        if old is None or new == old:
            return False
        if new < old:
            self.on_reduction(m.t_us, old, new)
        else:
            self.on_growth(m.t_us, old, new, acked)
        return True

    def ssthresh(self) -> float:
        s = self.logged_ssthresh
        if s is not None and s < INFINITE_SSTHRESH:
            return s
        return self.implied_ssthresh if s is None else math.inf

    def on_reduction(self, t_us: float, old: int, new: int) -> None:
        loss_t = self.pending_loss
        if loss_t is not None and t_us - loss_t > (self.srtt or math.inf):
            loss_t = None  # a loss reduces the window within the ACK that declares it, or at the next
        ratio = new / old
        self.pending_loss = None
        beta = self.beta if self.beta is not None else 0.5
        if new <= 1.25 * MIN_WINDOW_PACKETS * self.mss and ratio < beta - BLIND_REDUCTION_SLACK:
            self.recovery, self.base, self.overlay = None, "SlowStart", "RetransmissionTimeout"
            self.flat_since, self.overlay_since = t_us, t_us
            self.emit(t_us, f"cwnd collapsed {old} → {new} B: persistent congestion (§7.6.2)")
            return
        after_loss = loss_t is not None and ratio < LOSS_REDUCTION_MAX
        blind = self.beta is not None and ratio <= self.beta + BLIND_REDUCTION_SLACK
        if not (after_loss or blind) or (self.recovery and not after_loss):
            return  # rounding, pacing quirks, or a reduction inside recovery (PRR)
        start = loss_t if after_loss else t_us
        boundary = self.largest_sent_by(start)
        self.recovery = _Recovery(start, -1 if boundary is None else boundary)
        self.implied_ssthresh, self.base, self.flat_since = new, "Recovery", None
        self.samples.clear()
        cause = "after the loss declared" if after_loss else "with no loss logged, ≈ β·cwnd"
        self.emit(start, f"cwnd {old} → {new} B {cause} at {start / 1e6:.6f} s (§7.3.2)", backdate=True)

    def on_growth(self, t_us: float, old: int, new: int, acked: int) -> None:
        self.pending_loss = None
        if self.recovery:
            self.recovery = None  # a window that grows is out of recovery (§7.3.2 forbids growth in it)
        # The state that follows is judged by where the window lands [§7.3.1], also for
        # an undo of a spurious reduction (quiche), which no ACK could grow this much.
        ss, ratio = self.ssthresh(), self.growth_per_acked(t_us, new)
        jump = new - old > 2 * max(acked, self.mss)
        if self.logged_ssthresh is None and not self.ssthresh_logged_when_set and ratio is not None and new < ss \
                and not jump:
            slow = ratio >= SS_GROWTH_RATIO
        else:
            slow = new < ss
        self.base = "SlowStart" if slow else "CongestionAvoidance"
        self.cwnd_limited, self.flat_since, self.acked_flat = True, t_us, 0
        rule = "cwnd < ssthresh (§7.3.1)" if slow else "cwnd ≥ ssthresh or slow growth (§7.3.3)"
        self.emit(t_us, f"cwnd grew {old} → {new} B, {rule}")

    def on_ack_unchanged(self, t_us: float, prior_bif: int | None, acked: int) -> None:
        """An ACK of ``acked`` bytes left the window alone: app-limited, out of slow start,
        or at a cap."""
        self.cwnd_limited = self.is_cwnd_limited(prior_bif)
        if self.recovery or self.pending_loss is not None or self.cwnd is None:
            return
        if not self.cwnd_limited:
            self.base, self.flat_since, self.acked_flat = "ApplicationLimited", None, 0
            self.samples.clear()
            self.emit(t_us, f"ACK with {prior_bif} B in flight, well below cwnd {self.cwnd} B (§7.8)")
            return
        if self.base == "ApplicationLimited":
            self.base, self.flat_since = self.growth_state(), t_us
            self.emit(t_us, f"ACK with {prior_bif} B in flight: cwnd-limited again")
        self.acked_flat += acked
        if self.base == "SlowStart" and self.logged_ssthresh is None and not self.ssthresh_logged_when_set \
                and self.acked_flat >= self.cwnd * SS_STALL:
            # Slow start grows on every cwnd-limited ACK [§7.3.1]; a stall this long means it
            # ended without a loss (HyStart, RFC 9406), as if ssthresh = cwnd.
            self.implied_ssthresh = min(self.implied_ssthresh, self.cwnd)
            self.base = "CongestionAvoidance"
            self.emit(t_us, f"cwnd-limited ACKs of {self.acked_flat} B left cwnd {self.cwnd} B unchanged: "
                            "slow start over")
        if self.flat_since is None:
            self.flat_since = t_us
        long_flat = self.srtt and t_us - self.flat_since >= MAXED_RTTS * self.srtt
        if long_flat and self.cwnd >= self.max_cwnd and self.base != "CongestionAvoidanceMaxed":
            self.base = "CongestionAvoidanceMaxed"
            self.emit(self.flat_since, f"cwnd {self.cwnd} B, its maximum, unchanged for {MAXED_RTTS}+ RTTs "
                                       "while cwnd-limited", backdate=True)

    def growth_per_acked(self, t_us: float, new: int) -> float | None:
        """Window growth per acknowledged byte over the last smoothed RTT of cwnd-limited
        ACKs (None without one): about 1 in slow start, mss/cwnd in NewReno's avoidance.
        Per ACK it would misread NewReno's one-datagram steps as slow start."""
        horizon = t_us - (self.srtt or 0)
        while len(self.samples) > 1 and self.samples[1][0] <= horizon:
            self.samples.popleft()
        if not self.samples:
            return None
        t0, acked0, cwnd0 = self.samples[0]
        acked = self.cum_acked - acked0
        return (new - cwnd0) / acked if acked > 0 and t0 <= horizon else None

    def is_cwnd_limited(self, prior_bif: int | None) -> bool:
        if prior_bif is None or self.cwnd is None:
            return True
        if self.cwnd < self.ssthresh():
            return prior_bif >= self.cwnd / 2
        return prior_bif >= self.cwnd - BURST_PACKETS * self.mss

    def growth_state(self) -> str:
        return "SlowStart" if (self.cwnd or 0) < self.ssthresh() else "CongestionAvoidance"

    def end_recovery(self, t_us: float, why: str) -> None:
        self.recovery = None
        self.samples.clear()
        self.base = self.growth_state() if self.cwnd_limited else "ApplicationLimited"
        self.flat_since = t_us
        self.emit(t_us, why)

    def largest_sent_by(self, t_us: float) -> int | None:
        """Largest application packet number sent at or before ``t_us`` (None: none)."""
        i = bisect.bisect_right(self.sent_t, t_us)
        return self.sent_max_pn[i - 1] if i else None
