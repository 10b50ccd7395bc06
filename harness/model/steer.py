"""Steered schedules: a run's own trace says when its sender was in which model state,
and a copy of its schedule with one impairment added at that moment leads the sender
from there along a transition it has not taken yet (issue 26).

Directed schedules (harness/schedule/directed.py) place TLC's abstract path on the
link from estimates of when a real sender sends what; most of them miss, because a
real sender's states do not come where slow start on a clean link would put them.
Steering reads them instead. A virtual-time run is a pure function of its schedule,
plan and seed (harness/virtual/determinism.py), so a schedule that adds an action at
datagram i behaves as its baseline up to i: the sender is in the state the baseline's
trace shows there, and the new impairment takes it on from that state. (In real time
the prefix is the same only roughly; steering still aims there.)

The mapping from a transition (X, action, Y) to an impairment, each placed from a
baseline's model states in link time (Span) and the datagrams it sent and received:

- OnPtoExpired from X: the acknowledgements' direction dark from a moment in X for a
  round trip and one and a half PTO periods (no data lost, the probe answered after
  the dark), and, as a second try, the data's direction dark for as long (the probe's
  ACK then reveals losses);
- OnPtoExpired from TailLossProbe (a second expiry): the same for three and a half
  periods;
- OnAckProcessed from TailLossProbe or RetransmissionTimeout into Y: the ACKs'
  direction dark from a moment in Y, for one or two expiries: the ACK after the dark
  ends the probe state with nothing lost, back in Y;
- OnPersistentCongestion from TailLossProbe or RetransmissionTimeout: the data's
  direction dark from a moment in any state for eight PTO periods;
- OnEcnCe from X: a CE mark on the datagram whose acknowledgement reaches the sender
  at a moment in X (sent a round trip before it); from a PTO state, the ACKs dark as
  above and the next datagrams marked, so that the probe's ACK echoes the mark;
- OnPacketsLost from X: the datagram dropped whose loss is found while the sender is
  in X (three datagrams after it acknowledged a round trip later, RFC 9002 §6.1.1);
  and, as a second try, one of the last two datagrams sent before a recovery period
  began, found lost only after the period ended (a packet sent before the period
  starts none: §7.3.2);
- a step the sender takes itself (an ACK processed, the window moved, the application
  running dry, …) from Recovery, TailLossProbe or RetransmissionTimeout: at a moment
  the baseline took that step, the sender brought into that state just before it (a
  loss found half a round trip earlier; a PTO expiry a fifth of a period earlier).

What the mapping cannot reach from a baseline, it does not try (e.g. persistent
congestion outside a PTO state needs a sender that keeps sending through the dark:
its PTO timer runs from its last send, RFC 9002 §6.2.1). What a steered run reaches
is measured by trace validation like any other run's.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, replace
from statistics import median

from harness.schedule.links import QUIC
from harness.schedule.types import Action, Schedule

Transition = tuple[str, str, str]
PTO_STATES = ("TailLossProbe", "RetransmissionTimeout")
#: RFC 9002 §6.1.1's kPacketThreshold.
PACKET_THRESHOLD = 3
#: The peer's max_ack_delay in a PTO period (RFC 9002 §6.2.1): the stacks' default, 25 ms.
MAX_ACK_DELAY_US = 25_000
#: Persistent congestion's outage, in PTO periods (as harness/schedule/directed.py).
PERSISTENT_PTOS = 8
#: Moments tried per state: in at most this many of its spans, at three points each.
SPANS_TRIED = 3
#: Baselines kept per target: the first runs, which the explicit examples make.
BASELINES_KEPT = 8
#: Datagrams CE-marked after the acknowledgements go dark, so that the probe is one.
PROBE_MARKS = 8


@dataclass(frozen=True)
class Span:
    state: str
    t0: float  # link time, µs
    t1: float


@dataclass(frozen=True)
class Baseline:
    """What steering needs of one validated run."""

    schedule: Schedule
    cap: int                       # the run's window cap, datagrams (0: none)
    spans: tuple[Span, ...]        # the model's state over link time
    steps: tuple[tuple[float, str, str, str], ...]  # (link time, state, action, after)
    s2c: tuple[float, ...]         # when each datagram of the transfer (by fidx) entered the link
    c2s: tuple[float, ...]         # and when each of the peer's reached the sender (_reaching)
    rtt_us: float
    pto_us: float                  # the PTO period over the run (median)
    #: (link time, PTO period) where the trace logged its RTT estimate: the period at
    #: a moment, which early in a connection is longer than the median (RFC 9002 §6.2.1).
    ptos: tuple[tuple[float, float], ...] = ()

    def pto_at(self, t: float) -> float:
        i = bisect.bisect_right([x for x, _ in self.ptos], t) - 1
        return self.ptos[i][1] if i >= 0 else self.pto_us


def baseline(schedule: Schedule, cap: int, trace, steps, s2c_records, c2s_records) -> Baseline | None:
    """A Baseline from one run: its schedule and cap, the sender's trace (events with
    t_us; Step.line is 1-based into trace.events), the validation's steps and the
    ground truth's records of the transfer each way. None when the trace's clock
    cannot be matched to the link's."""
    from harness.observe.events import Metrics, PacketSent

    s2c = sorted(s2c_records, key=lambda r: r.fidx)
    c2s = sorted(c2s_records, key=lambda r: r.fidx)
    offset = _offset(trace.of(PacketSent), s2c)
    if offset is None or not steps:
        return None
    timed = []
    for s in steps:
        if 1 <= s.line <= len(trace.events):
            timed.append((trace.events[s.line - 1].t_us + offset, s.state, s.action, s.after))
    spans: list[Span] = []
    for t, _, _, after in timed:
        if spans and spans[-1].state == after:
            continue
        if spans:
            spans[-1] = replace(spans[-1], t1=t)
        spans.append(Span(after, t, t))
    if spans:
        spans[-1] = replace(spans[-1], t1=max(timed[-1][0], spans[-1].t0))
    rtt = _rtt(schedule)
    metrics = [m for m in trace.of(Metrics) if m.smoothed_rtt_us]
    srtt = median(m.smoothed_rtt_us for m in metrics) if metrics else rtt
    var = median(m.rtt_variance_us for m in metrics if m.rtt_variance_us) if any(
        m.rtt_variance_us for m in metrics) else srtt / 4
    ptos, last_var = [], srtt / 2
    for m in metrics:
        last_var = m.rtt_variance_us if m.rtt_variance_us is not None else last_var
        ptos.append((m.t_us + offset, m.smoothed_rtt_us + 4 * last_var + MAX_ACK_DELAY_US))
    return Baseline(schedule, cap, tuple(spans), tuple(timed), tuple(r.arr_us for r in s2c),
                    _reaching(c2s, _one_way(schedule, "c2s")), max(rtt, srtt), srtt + 4 * var + MAX_ACK_DELAY_US,
                    tuple(ptos))


def _reaching(records, one_way: float) -> tuple[float, ...]:
    """When each of the peer's datagrams reached the sender (its departure from the
    link; a dropped one when it would have), never decreasing, so a moment bisects to
    the first datagram the sender would see after it."""
    out, last = [], 0.0
    for r in records:
        last = max(last, r.dep_us if r.dep_us is not None else r.arr_us + one_way)
        out.append(last)
    return tuple(out)


def _one_way(schedule: Schedule, direction: str) -> float:
    return float(getattr(schedule.phases[0], direction).delay_us or 0)


def _offset(sent, s2c) -> float | None:
    """Link time minus trace time: the median over the first data packets of the gap
    between a packet's send and its datagram's arrival at the link (the n-th sent
    1-RTT packet is taken for the n-th datagram after the handshake's: close enough
    for a median, which only places moments to a fraction of a round trip)."""
    app = [e.t_us for e in sent if getattr(e, "space", "application") == "application"]
    if not app or len(s2c) < 4:
        return None
    first = len(s2c) - len(app) if len(s2c) >= len(app) else 0
    pairs = [(s2c[first + i].arr_us - t) for i, t in enumerate(app[:200]) if first + i < len(s2c)]
    return median(pairs) if pairs else None


def _rtt(schedule: Schedule) -> float:
    return _one_way(schedule, "c2s") + _one_way(schedule, "s2c") or 40_000.0


def _moments(b: Baseline, state: str) -> list[float]:
    """A few moments the baseline's sender spent in `state`: as it begins, midway and late in
    each of its first SPANS_TRIED spans of it, none before its first acknowledgement
    (before that the handshake is still under way, and its datagrams are not the
    transfer's)."""
    first_ack = next((t for t, _, a, _ in b.steps if a == "OnPacketsAcked"), 0.0)
    out = []
    for s in [s for s in b.spans if s.state == state and s.t1 > first_ack][:SPANS_TRIED]:
        t0 = max(s.t0, first_ack)
        span = s.t1 - t0
        out += [t0 + span * f for f in (0.0, 0.5, 0.9)] if span > 0 else [t0]
    return out


def _first_after(times: tuple[float, ...], t: float) -> int | None:
    """The first datagram strictly after `t`: a span begins at the ACK that led into
    it, which must still get through."""
    i = bisect.bisect_right(times, t)
    return i if i < len(times) else None


def _dark(b: Baseline, direction: str, t: float, expiries: int) -> Action | None:
    """The direction dark from the first datagram the sender would meet after `t`,
    long enough for `expiries` PTO expiries in a row and not the next: until
    halfway between them (they come 1, 3, 7, … periods after the last send, RFC 9002
    §6.2.1). With the data's direction dark the sender goes on sending for a round
    trip (the acknowledgements of what it sent before open its window): one more."""
    i = _first_after(b.s2c if direction == "s2c" else b.c2s, t)
    if i is None:
        return None
    periods = 3 * 2 ** (expiries - 1) - 1
    return Action(direction, i, "outage", flow=QUIC,
                  duration_us=round(periods * b.pto_at(t) + (b.rtt_us if direction == "s2c" else 0)))


def _drop_found_at(b: Baseline, t: float) -> Action | None:
    """The data datagram whose loss the sender finds at about `t`: the latest whose
    third successor reached the link a round trip before `t`."""
    i = bisect.bisect_right(b.s2c, t - b.rtt_us) - 1 - PACKET_THRESHOLD
    return Action("s2c", i, "drop", flow=QUIC) if i >= 0 else None


def _recovery_starts(b: Baseline) -> list[float]:
    return [t for t, state, _, after in b.steps if after == "Recovery" and state != "Recovery"]


def _expiries(state: str) -> int:
    """PTO expiries in a row that put a sender in `state`."""
    return 2 if state == "RetransmissionTimeout" else 1


def _enter(b: Baseline, state: str, t: float) -> list[Action]:
    """Impairments that should put the sender in `state` just before `t`."""
    if state == "Recovery":
        a = _drop_found_at(b, t - b.rtt_us / 2)
        return [a] if a else []
    if state in PTO_STATES:
        k = _expiries(state)
        # The acknowledgements dark from about the last send, so that the k-th expiry
        # comes a fifth of a period before `t`.
        a = _dark(b, "c2s", t - (2 ** k - 1 + 0.2) * b.pto_at(t), k)
        return [a] if a else []
    return []


def impairments(b: Baseline, t: Transition) -> list[list[Action]]:
    """The actions that may steer a run of the baseline's schedule along `t`, best
    first: each a list of actions added together (most are one)."""
    src, action, dst = t
    out: list = []
    if action == "OnPtoExpired":
        k = 2 if src == "TailLossProbe" else 1
        moments = [m for s in b.spans for m in _moments(b, s.state)][:9] if src in PTO_STATES else _moments(b, src)
        for m in moments:
            out += [_dark(b, "c2s", m, k), _dark(b, "s2c", m, k)]
    elif action == "OnAckProcessed" and src in PTO_STATES:
        out += [_dark(b, "c2s", m, _expiries(src)) for m in _moments(b, dst)]
    elif action == "OnPersistentCongestion" and src in PTO_STATES:
        for m in _moments(b, "SlowStart")[:3] + _moments(b, "CongestionAvoidance")[:3]:
            a = _dark(b, "s2c", m, 1)
            out.append(a and replace(a, duration_us=round(PERSISTENT_PTOS * b.pto_at(m) + b.rtt_us)))
    elif action == "OnEcnCe" and src in PTO_STATES:
        # The probe CE-marked, and its ACK held back past the expiry: the first
        # datagrams the sender sends once the acknowledgements go dark (what the
        # window still allows, then the probe) all marked.
        for m in [m for st in ("SlowStart", "CongestionAvoidance") for m in _moments(b, st)][:SPANS_TRIED]:
            dark = _dark(b, "c2s", m, _expiries(src))
            first = _first_after(b.s2c, m)
            if dark and first is not None:
                out.append([dark, *(Action("s2c", first + j, "ce", flow=QUIC) for j in range(PROBE_MARKS))])
    elif action == "OnEcnCe":
        # A CE mark on the datagram whose acknowledgement reaches the sender at a
        # moment in X: the last one sent a round trip before it.
        for m in _moments(b, src):
            i = bisect.bisect_right(b.s2c, m - b.rtt_us) - 1
            out.append(Action("s2c", i, "ce", flow=QUIC) if i >= 0 else None)
    elif action == "OnPacketsLost" and src not in PTO_STATES:
        out += [_drop_found_at(b, m) for m in _moments(b, src)]
        for start in _recovery_starts(b)[:SPANS_TRIED]:
            i = bisect.bisect_left(b.s2c, start) - 1
            out += [Action("s2c", j, "drop", flow=QUIC) for j in (i, i - 1) if j >= 0]
    elif src in ("Recovery", *PTO_STATES) and action not in ("OnPacketsLost", "OnPersistentCongestion", "OnEcnCe"):
        # Every third of the baseline's first nine such steps: moments apart.
        for tt, _, _, _ in [s for s in b.steps if s[2] == action][:SPANS_TRIED * 3:3]:
            out += _enter(b, src, tt)
    return [a if isinstance(a, list) else [a] for a in out if a is not None]


def candidates(b: Baseline, t: Transition) -> list[tuple[Schedule, int]]:
    """Steered (schedule, cap) pairs for `t`: the baseline's schedule with the actions
    of one impairment added (one that would put a second action of a kind on a
    datagram that has one already is left out)."""
    taken = {(a.dir, a.index, a.action) for a in b.schedule.actions}
    out, seen = [], set()
    for added in impairments(b, t):
        key = tuple((a.dir, a.index, a.action, a.duration_us) for a in added)
        if key in seen or any((a.dir, a.index, a.action) in taken for a in added):
            continue
        seen.add(key)
        actions = sorted((*b.schedule.actions, *added), key=lambda x: (x.dir, x.index, x.action))
        out.append((replace(b.schedule, actions=tuple(actions)), b.cap))
    return out


#: Per target id, the baselines its runs this session gave.
_baselines: dict[str, list[Baseline]] = {}
#: Steered schedule → the cap its baseline ran with (the prefix needs the same one),
#: and the target and transition it was steered at.
_caps: dict[Schedule, int] = {}
_aims: dict[Schedule, tuple[str, Transition]] = {}
#: Steered schedules already run this session, and per (target, transition) how many
#: were aimed at it: a miss is not drawn again, and the transitions tried least come first.
_ran: set[Schedule] = set()
_tries: Counter = Counter()
#: (target, drawn index) → the steered schedule that draw gave (steered()).
_by_draw: dict[tuple[str | None, int], Schedule] = {}
#: Steered runs aimed at one transition before it is given up for the session: what
#: one baseline's moments cannot reach, the next few rarely do.
TRIES_PER_TRANSITION = 4


def keep(target_id: str, b: Baseline | None) -> None:
    if b is not None and len(_baselines.setdefault(target_id, [])) < BASELINES_KEPT:
        _baselines[target_id].append(b)


def _tier(t: Transition) -> int:
    """0 where the added impairment itself is the step (an expiry, the ACK after a
    dark, a CE echo, a loss that begins a recovery period); 1 where the sender must
    take a step of its own in the state it was led into, or find a loss that begins
    none: fewer of these reach their transition, so they wait for the others."""
    src, action, dst = t
    direct = action in ("OnPtoExpired", "OnAckProcessed", "OnEcnCe", "OnPersistentCongestion") or (
        action == "OnPacketsLost" and dst == "Recovery" and src != "Recovery")
    return 0 if direct else 1


def pool(target_id: str | None, pending: set[Transition] | None) -> list[tuple[Schedule, int]]:
    """The steered (schedule, cap) to draw from now: for each pending transition of
    `target_id` among those tried least so far (and fewer than TRIES_PER_TRANSITION
    times), and of those the direct ones (_tier) first, its next candidate not yet
    run, the baselines taken in turn."""
    if not target_id or not pending:
        return []
    nexts = {}
    for t in sorted(pending):
        if _tries[(target_id, t)] >= TRIES_PER_TRANSITION:
            continue
        per = [candidates(b, t) for b in _baselines.get(target_id, [])]
        untried = [c for tier in _interleave(per) for c in tier if c[0] not in _ran]
        if untried:
            nexts[t] = untried[0]
    if not nexts:
        return []
    least = min((_tries[(target_id, t)], _tier(t)) for t in nexts)
    out = []
    for t, (s, cap) in nexts.items():
        if (_tries[(target_id, t)], _tier(t)) == least:
            _caps[s], _aims[s] = cap, (target_id, t)
            out.append((s, cap))
    return out


def _interleave(lists: list[list]) -> list[list]:
    width = max((len(x) for x in lists), default=0)
    return [[x[i] for x in lists if i < len(x)] for i in range(width)]


def cap_of(schedule: Schedule, drawn: int) -> int:
    """The cap a steered schedule's baseline ran with; `drawn` for any other."""
    return _caps.get(schedule, drawn)


def aim_of(schedule: Schedule) -> Transition | None:
    """The transition a steered schedule was steered at; None for any other."""
    return _aims[schedule][1] if schedule in _aims else None


def ran(schedule: Schedule) -> Transition | None:
    """Notes that `schedule` ran; the transition it was steered at (None: not steered)."""
    if schedule in _aims and schedule not in _ran:
        _tries[_aims[schedule]] += 1
    _ran.add(schedule)
    return aim_of(schedule)


def steered(fallback, pending=lambda: None, current=lambda: None):
    """Steered schedules for the transitions `pending()` names on target `current()`,
    from the baselines kept this session (keep); `fallback` (a strategy) while there
    are none. Hypothesis needs the same draws whatever the session's state: the
    index is drawn over a fixed range, then taken among the steered schedules there
    are now, and the fallback is drawn from only when there are none."""
    from hypothesis import strategies as st

    from harness.schedule.links import replayable

    @replayable
    def build() -> st.SearchStrategy[Schedule]:
        @st.composite
        def draw_one(draw) -> Schedule:
            i = draw(st.integers(min_value=0, max_value=10_000))
            # The same draw gives the same schedule for the rest of the session, so that
            # Hypothesis replaying a failing example (to shrink it, or to report it)
            # runs that example again, not the next one the pool would offer.
            key = (current(), i)
            if key in _by_draw:
                return _by_draw[key]
            steerable = pool(current(), pending())
            if not steerable:
                return draw(fallback)
            _by_draw[key] = steerable[i % len(steerable)][0]
            return _by_draw[key]
        return draw_one()

    return build()
