"""Directed schedules: a TLC path to a model transition (harness/model/traps.py) as
link impairments (issue 26 part 2).

The model counts packets in datagrams from an initial window of 3; a real sender
starts with about 10 and has sent a handshake first. The mapping, step by step:

- model packet pn → the QUIC flow's server→client datagram FIRST_DATA + pn·stride,
  stride 2 to 4 (about 10/3: a model datagram stands for a few real ones);
- OnPacketsLost(pn) → that datagram dropped;
- OnEcnCe(pn) → that datagram marked CE (a sender that does not use ECN ignores it);
- a run of k OnPtoExpired steps → an outage of the data direction (the link's
  `outage` action: dark from a given datagram on, for a given time) from the first
  datagram after those the path has had acknowledged (and no later than the first
  it has left unacknowledged), for one round trip (the sender goes on sending into
  the dark while the acknowledgements of earlier datagrams open its window, and the
  PTO timer runs from its last send) and then 1.5·2^(k−1) − 1 PTO periods: halfway
  between the (k−1)-th expiry and the k-th (they come 1, 3, 7, … periods after that
  send), so the probes of the first k − 1 are lost and the k-th one's probe is
  answered. The dark starts at a datagram, not at a time: a blackhole placed at the
  time a datagram was estimated to leave (slow start from the base link) came too
  early or too late once a loss had halved the window, and took the acknowledgement
  that ends a recovery period, so the expiry came inside it (the PTO paths out of
  congestion avoidance all missed);
- OnPersistentCongestion → an outage from the same datagram for PERSISTENT_PTOS
  periods (RFC 9002 §7.6.1: the lost packets must span three PTO periods, with none
  between them acknowledged; eight leave room for the estimate's error); the model
  has no time, so its path shows only the losses;
- outages that overlap keep the direction dark until the later end;
- every other action (sends, acknowledgements, the end of an ACK's processing, window
  moves, probe losses, the end of slow start) is the sender's own doing: no link action;
- SetAppLimited is the plan's, not the link's: the conformance plan's application
  runs dry after its first object (harness/observe/appdata.py) and resumes with the
  second. A path through it is placed at the first object's tail (`tail`, from the
  plan: tail_datagram): the last packet the path sends before its application runs
  dry is the datagram carrying that object's last byte, one later per datagram the
  path drops before it (its data goes out again first), and the packets before it
  keep their spacing; an outage from there on gets no extra round trip (a dry sender
  sends nothing more into the dark). Hypothesis draws the tail's offset
  (TAIL_SPREAD): the stacks' tails differ by a few datagrams, and the application-
  limited mark comes only once less than half the window is in flight, some way past
  it. Without a tail (another plan), paths through SetAppLimited are left out, and
  the paths to every other transition avoid it (harness/model/traps.py).

Where the path needs a round trip between two packets (a send after an
acknowledgement), when a datagram is sent is estimated from slow start on the base
link (the first data a round trip and a half after the link starts, the window
doubling each round trip); a PTO period as 1.25·RTT + max_ack_delay (25 ms), RFC 9002 §6.2.1 with the
variance of a steady transfer (aioquic on a 40 ms link: 65 ms measured, 75 estimated). Estimates, not promises: what a path reaches is
measured by trace validation (BENCHMARKS.md, "Directed generation").
"""

from __future__ import annotations

import math

from hypothesis import strategies as st

from harness.schedule.strategies import QUIC, BaseLink, base_links, replayable, seeds
from harness.schedule.types import Action, Schedule

FIRST_DATA = 20
INITIAL_WINDOW = 10
MAX_ACK_DELAY_MS = 25
PERSISTENT_PTOS = 8
#: Actions mapped only where the plan's first object is known (`tail`): without
#: it, paths through them are not turned into schedules.
UNMAPPED = frozenset({"SetAppLimited"})
#: The stream bytes a 1252-byte datagram carries, about (aioquic, quinn and quiche
#: send 1252-byte datagrams on the testbed's links), and the datagram before them.
DATA_PER_DATAGRAM = 1210
HANDSHAKE_DATAGRAMS = 1
#: How far from the estimated tail a directed schedule may place it: Hypothesis
#: draws the offset (the stacks' tails on a clean link differ by a few datagrams).
TAIL_SPREAD = (-24, 6)


def tail_datagram(first_object_bytes: int) -> int:
    """The server datagram carrying the last byte of a first object of that size on a
    clean link: where its sender runs dry (a 400 kB object: datagram 331 on aioquic,
    about 332–339 on quinn and quiche, measured)."""
    return HANDSHAKE_DATAGRAMS + math.ceil(first_object_bytes / DATA_PER_DATAGRAM) - 1


def pto_ms(base: BaseLink) -> float:
    return 1.25 * base.rtt_us / 1000 + MAX_ACK_DELAY_MS


def sent_at_ms(base: BaseLink, index: int) -> float:
    """When slow start on `base` sends the `index`-th server datagram (an estimate)."""
    rounds = math.log2(max(index, 1) / INITIAL_WINDOW + 1)
    return base.rtt_us / 1000 * (1.5 + rounds)


def index_at(base: BaseLink, t_ms: float) -> int:
    """The server datagram slow start on `base` sends at `t_ms` (sent_at_ms inverted)."""
    rounds = max(t_ms / (base.rtt_us / 1000) - 1.5, 0.0)
    return math.ceil(INITIAL_WINDOW * (2 ** rounds - 1))


def datagrams(path, base: BaseLink, stride: int, first: int = FIRST_DATA) -> dict[int, int]:
    """Model packet number → the server datagram it stands for: `stride` apart, and a
    packet the model sends after an acknowledgement of packet q no earlier than the
    datagram sent a round trip after q's. The model's window is 3 datagrams, so its
    packets after an ACK follow at once; a real sender's next packets after the ACK
    that began a recovery period are sent a round trip later, and a loss among the
    datagrams in between would fall in that same period, which is no new congestion
    event (RFC 9002 §7.3.2)."""
    real: dict[int, int] = {}
    floor, last = first, None
    for s in path:
        if s.action == "OnPacketSent" and s.pn >= 0 and s.pn not in real:
            last = max(first if last is None else last + stride, floor)
            real[s.pn] = last
        elif s.action == "OnPacketsAcked" and s.pn in real:
            floor = max(floor, index_at(base, sent_at_ms(base, real[s.pn]) + base.rtt_us / 1000))
    return real


def sent_before_dry(path) -> list[int] | None:
    """The packets a path sends before its application runs dry (SetAppLimited TRUE),
    in order; None when it never does."""
    dry = next((i for i, s in enumerate(path) if s.action == "SetAppLimited" and s.pn == 1), None)
    return None if dry is None else [s.pn for s in path[:dry] if s.action == "OnPacketSent" and s.pn >= 0]


def at_the_tail(path, base: BaseLink, stride: int, tail: int) -> dict[int, int]:
    """As datagrams(), for a path on which the application runs dry (SetAppLimited
    TRUE): the last packet it sends before that is the datagram carrying the first
    object's last byte, `tail` (one later for each datagram the path drops before it:
    its data is sent again first), and the packets before it keep their spacing."""
    before = sent_before_dry(path)
    if not before:
        return datagrams(path, base, stride, tail + 1)
    lost = {s.pn for s in path if s.action == "OnPacketsLost"}
    for _ in range(2):  # the drops before the tail move it, once
        lo, hi = FIRST_DATA, tail
        while lo < hi:  # the latest start that puts the last packet at or before the tail
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if datagrams(path, base, stride, mid)[before[-1]] <= tail else (lo, mid - 1)
        real = datagrams(path, base, stride, lo)
        real = {pn: i + tail - real[before[-1]] for pn, i in real.items()}
        tail += sum(1 for pn in lost if real[pn] < tail)
    return real


def to_schedule(path, base: BaseLink, seed: int, stride: int = 3, tail: int | None = None) -> Schedule:
    """The schedule a path of traps.Step maps to (module docstring); `tail`: the
    datagram carrying the plan's first object's last byte, after which its
    application is dry (None: unknown, and a path through SetAppLimited is refused)."""
    dries = any(s.action == "SetAppLimited" for s in path)
    if dries and tail is None:
        raise ValueError(f"a path through {sorted(UNMAPPED & {s.action for s in path})} has no mapping to a schedule "
                         "without the datagram where the plan's first object ends (tail)")
    before = sent_before_dry(path)
    real = datagrams(path, base, stride) if before is None else at_the_tail(path, base, stride, tail)
    # The datagram after which the sender has nothing new to send: the object's last.
    dry_from = real[before[-1]] if before else None

    def index(pn: int) -> int:
        return real.get(pn, FIRST_DATA + max(pn, 0) * stride)

    actions = []
    acked, i = set(), 0
    sent: list[int] = []

    def outage_from() -> int:
        # The first datagram the dark may take: after every one the path has had
        # acknowledged so far, and no later than the first it has not.
        delivered = max((index(q) for q in acked), default=FIRST_DATA - 1)
        unresolved = [index(q) for q in sent if q not in acked]
        return max(delivered + 1, min(unresolved, default=delivered + 1))

    while i < len(path):
        s = path[i]
        if s.action == "OnPacketSent":
            sent.append(s.pn)
        elif s.action == "OnPacketsAcked":
            acked.add(s.pn)
        elif s.action == "OnPacketsLost":
            actions.append(Action("s2c", index(s.pn), "drop", flow=QUIC))
        elif s.action == "OnEcnCe":
            actions.append(Action("s2c", index(s.pn), "ce", flow=QUIC))
        elif s.action == "OnPersistentCongestion":
            # Losses spanning the persistent-congestion duration, with none of the
            # packets between them acknowledged (RFC 9002 §7.6.2): dark from the first
            # datagram after those the path has acknowledged.
            actions.append(Action("s2c", outage_from(), "outage", flow=QUIC,
                                  duration_us=round(PERSISTENT_PTOS * pto_ms(base) * 1000)))
        elif s.action == "OnPtoExpired":
            k = 0
            while i < len(path) and path[i].action in ("OnPtoExpired", "OnProbeLoss"):
                k += path[i].action == "OnPtoExpired"
                i += 1
            # The PTO timer starts at the last send, which in the dark comes about a round
            # trip after its first datagram (the acknowledgements of those before it still
            # open the window): one RTT more, then halfway to the k-th expiry. A sender
            # whose application is dry by then sends nothing more into the dark: no RTT.
            start = outage_from()
            dry_then = dry_from is not None and start >= dry_from
            periods = (0 if dry_then else base.rtt_us / 1000 / pto_ms(base)) + 1.5 * 2 ** (k - 1) - 1
            actions.append(Action("s2c", start, "outage", flow=QUIC, duration_us=round(periods * pto_ms(base) * 1000)))
            continue
        i += 1
    # One action per datagram and kind; of two outages at one datagram, the longer.
    unique: dict = {}
    for a in actions:
        key = (a.index, a.action)
        if key not in unique or (a.duration_us or 0) > (unique[key].duration_us or 0):
            unique[key] = a
    return base.schedule(seed, actions=sorted(unique.values(), key=lambda a: (a.index, a.action)))


@replayable
def directed(paths: dict, pending=lambda: None, tail: int | None = None) -> st.SearchStrategy[Schedule]:
    """Schedules from the trap paths (transition → steps). `pending()` names the
    transitions still to reach (this session's target has not yet), drawn from first;
    None or empty: all of them. `tail`: the datagram where the plan's first object
    ends (tail_datagram), which maps the paths through an application's pause; None:
    those paths are left out."""
    usable = {t: p for t, p in sorted(paths.items())
              if tail is not None or not any(s.action in UNMAPPED for s in p)}
    order = list(usable)

    @st.composite
    def build(draw) -> Schedule:
        # Hypothesis needs the same draws whatever the session's state: the index is
        # drawn over all transitions, then taken among those still pending.
        i = draw(st.integers(min_value=0, max_value=len(order) - 1))
        wanted = [t for t in order if t in (pending() or ())] or order
        t = wanted[i % len(wanted)]
        base, seed, stride = draw(base_links), draw(seeds), draw(st.integers(min_value=2, max_value=4))
        shift = draw(st.integers(*TAIL_SPREAD))
        return to_schedule(usable[t], base, seed, stride, None if tail is None else tail + shift)

    return build()
