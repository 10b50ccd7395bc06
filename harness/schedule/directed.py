"""Directed schedules: a TLC path to a model transition (harness/model/traps.py) as
link impairments (issue 26 part 2).

The model counts packets in datagrams from an initial window of 3; a real sender
starts with about 10 and has sent a handshake first. The mapping, step by step:

- model packet pn → the QUIC flow's server→client datagram FIRST_DATA + pn·stride,
  stride 2 to 4 (about 10/3: a model datagram stands for a few real ones);
- OnPacketsLost(pn) → that datagram dropped;
- OnEcnCe(pn) → that datagram marked CE (a sender that does not use ECN ignores it);
- a run of k OnPtoExpired steps → the data direction dark from when the last packet
  before them was sent, for one round trip (the sender goes on sending into the dark
  while the acknowledgements of earlier packets open its window, and the PTO timer
  runs from its last send) and then 1.5·2^(k−1) − 1 PTO periods: halfway between the
  (k−1)-th expiry and the k-th (they come 1, 3, 7, … periods after that send), so the
  probes of the first k − 1 are lost and the k-th one's probe is answered. (The dark
  had lasted 2^k − ½ periods, past the k-th expiry: its probe was lost too, and every
  such path took one expiry more, so no run reached TailLossProbe's own transitions.)
- OnPersistentCongestion → the data direction dark from when the first packet lost
  since the window last grew was sent, for PERSISTENT_PTOS periods (RFC 9002 §7.6.1:
  the lost packets must span three PTO periods; eight leave room for the estimate's
  error); the model has no time, so its path shows only the losses;
- blackholes that overlap merge into one;
- every other action (sends, acknowledgements, the end of an ACK's processing, window
  moves, probe losses, the end of slow start) is the sender's own doing: no link action;
- SetAppLimited has no link mapping: an application's pause is the plan's (the
  conformance plan pauses between its two objects, and the capture shows the sender
  dry, harness/observe/appdata.py); paths through it are left out, and the paths to
  every other transition avoid it (harness/model/traps.py).

When a datagram is sent is estimated from slow start on the base link (the first
data a round trip and a half after the link starts, the window doubling each round
trip); a PTO period as 1.25·RTT + max_ack_delay (25 ms), RFC 9002 §6.2.1 with the
variance of a steady transfer (aioquic on a 40 ms link: 65 ms measured, 75 estimated). Estimates, not promises: what a path reaches is
measured by trace validation (BENCHMARKS.md, "Directed generation").
"""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import strategies as st

from harness.schedule.strategies import QUIC, BaseLink, base_links, replayable, seeds
from harness.schedule.types import Action, Phase, Schedule

FIRST_DATA = 20
INITIAL_WINDOW = 10
MAX_ACK_DELAY_MS = 25
PERSISTENT_PTOS = 8
#: Actions with no mapping: paths through them are not turned into schedules.
UNMAPPED = frozenset({"SetAppLimited"})


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


def datagrams(path, base: BaseLink, stride: int) -> dict[int, int]:
    """Model packet number → the server datagram it stands for: `stride` apart, and a
    packet the model sends after an acknowledgement of packet q no earlier than the
    datagram sent a round trip after q's. The model's window is 3 datagrams, so its
    packets after an ACK follow at once; a real sender's next packets after the ACK
    that began a recovery period are sent a round trip later, and a loss among the
    datagrams in between would fall in that same period, which is no new congestion
    event (RFC 9002 §7.3.2)."""
    real: dict[int, int] = {}
    floor, last = FIRST_DATA, None
    for s in path:
        if s.action == "OnPacketSent" and s.pn >= 0 and s.pn not in real:
            last = max(FIRST_DATA if last is None else last + stride, floor)
            real[s.pn] = last
        elif s.action == "OnPacketsAcked" and s.pn in real:
            floor = max(floor, index_at(base, sent_at_ms(base, real[s.pn]) + base.rtt_us / 1000))
    return real


def to_schedule(path, base: BaseLink, seed: int, stride: int = 3) -> Schedule:
    """The schedule a path of traps.Step maps to (module docstring)."""
    if any(s.action in UNMAPPED for s in path):
        raise ValueError(f"a path through {sorted(UNMAPPED & {s.action for s in path})} has no mapping to a schedule")
    real = datagrams(path, base, stride)

    def index(pn: int) -> int:
        return real.get(pn, FIRST_DATA + max(pn, 0) * stride)

    def at(pn: int) -> float:
        return sent_at_ms(base, index(pn))

    actions, dark = [], []  # dark: (start ms, PTO periods)
    largest_sent, lost, i = -1, [], 0
    while i < len(path):
        s = path[i]
        if s.action == "OnPacketSent":
            largest_sent = s.pn
        elif s.action == "OnPacketsLost":
            actions.append(Action("s2c", index(s.pn), "drop", flow=QUIC))
            lost.append(s.pn)
        elif s.action == "OnEcnCe":
            actions.append(Action("s2c", index(s.pn), "ce", flow=QUIC))
        elif s.action == "OnPersistentCongestion":
            # Losses spanning the persistent-congestion duration: dark from the first of them.
            dark.append((at(min(lost, default=largest_sent)), PERSISTENT_PTOS))
            lost = []
        elif s.action == "GrowWindow":
            lost = []  # "since the window last grew"
        elif s.action == "OnPtoExpired":
            k = 0
            while i < len(path) and path[i].action in ("OnPtoExpired", "OnProbeLoss"):
                k += path[i].action == "OnPtoExpired"
                i += 1
            # The PTO timer starts at the last send, which in the dark comes about a round
            # trip after the last packet before it (the acknowledgements of those still
            # open the window): one RTT more, then halfway to the k-th expiry.
            dark.append((at(largest_sent), base.rtt_us / 1000 / pto_ms(base) + 1.5 * 2 ** (k - 1) - 1))
            continue
        i += 1
    phases, end = [], None
    for start, periods in sorted(dark):
        stop = start + periods * pto_ms(base)
        if end is not None and start <= end:  # overlaps the last blackhole: one longer one
            phases.pop()
            stop = max(stop, end)
        else:
            phases.append(Phase(int(start * 1000), base.settings(), replace(base.settings(), blackhole=True)))
        phases.append(Phase(int(stop * 1000), base.settings(), base.settings()))
        end = stop
    unique = {(a.index, a.action): a for a in actions}
    return base.schedule(seed, actions=sorted(unique.values(), key=lambda a: a.index), phases=phases)


@replayable
def directed(paths: dict, pending=lambda: None) -> st.SearchStrategy[Schedule]:
    """Schedules from the trap paths (transition → steps). `pending()` names the
    transitions still to reach (this session's target has not yet), drawn from first;
    None or empty: all of them."""
    usable = {t: p for t, p in sorted(paths.items()) if not any(s.action in UNMAPPED for s in p)}
    order = list(usable)

    @st.composite
    def build(draw) -> Schedule:
        # Hypothesis needs the same draws whatever the session's state: the index is
        # drawn over all transitions, then taken among those still pending.
        i = draw(st.integers(min_value=0, max_value=len(order) - 1))
        wanted = [t for t in order if t in (pending() or ())] or order
        t = wanted[i % len(wanted)]
        return to_schedule(usable[t], draw(base_links), draw(seeds), draw(st.integers(min_value=2, max_value=4)))

    return build()
