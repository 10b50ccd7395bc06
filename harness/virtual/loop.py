"""The discrete-event loop of a virtual run: two hosts and the emulator's core.

Time is an integer count of ns since the link started; it only moves forward, to
the earliest of: the link's next deadline, either host's protocol timer, either
host's application timer. At each instant the loop delivers what the link has due,
fires due timers, then lets each host send (the order a real event loop would see).

Float timers. Sans-IO stacks such as aioquic keep time as float seconds. A timer at
float T maps to the instant ceil(T·1e9) ns, but ceil(T·1e9)/1e9 can be one ulp below
T, and a stack asked "is it time?" at that float says no, keeps T and asks to be
woken at the same instant again: a livelock at a frozen clock. Two guards:
- a host's clock is monotonic and, when a timer fires, never below the timer's own
  float value (`Host.clock_s`), so the stack sees `now >= T`;
- a timer that is still due after being handled at instant t is next fired at t+1 ns,
  and one that stays unchanged for STUCK_LIMIT consecutive firings raises
  VirtualTimeError naming the host and the timer, instead of spinning forever.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass, field

import longlook_link

#: Consecutive firings of an unchanged, still-due timer before the run is abandoned.
STUCK_LIMIT = 1000
REVERSE = {"c2s": "s2c", "s2c": "c2s"}
#: A host's cached timer that a call into the host may have changed.
_STALE = object()


class Clock:
    """The run's virtual time, ns since the link's start: the loop sets it, and
    whatever stamps events with time (qlog, the stack's wall-clock reads) reads
    it, as an attribute, since qlog reads it for every event."""

    __slots__ = ("ns",)

    def __init__(self) -> None:
        self.ns = 0


class VirtualTimeError(RuntimeError):
    """The virtual run cannot advance (a stuck timer, an event loop with nothing
    left to do while the application waits); the message says which and when."""


@dataclass
class Host:
    """One side of the link. Subclasses implement the protocol hooks; the loop owns
    the clock bookkeeping below."""

    name: str
    addr: str
    port: int
    #: The float clock last shown to the stack, s (never decreases).
    last_s: float = 0.0
    #: The timer value last fired and the instant (ns) it fired at.
    fired: tuple[float, int] | None = None
    stuck: int = 0
    counters: dict[str, int] = field(default_factory=lambda: {"sent": 0, "received": 0, "corrupt_dropped": 0})

    def clock_s(self, now_ns: int, floor_s: float = 0.0) -> float:
        s = now_ns / 1e9
        if s < self.last_s:
            s = self.last_s
        if s < floor_s:
            s = floor_s
        self.last_s = s
        return s

    # -- protocol hooks ------------------------------------------------------------
    def timer_s(self) -> float | None:
        """The stack's next timer, float s, or None. It may change only in the hooks
        below (a sans-IO stack changes state only when called): the loop asks
        again only after calling one of them."""
        raise NotImplementedError

    def on_timer(self, now_s: float, now_ns: int) -> None:
        raise NotImplementedError

    def app_deadline_ns(self) -> int | None:
        """The application's next timer (think time, a give-up bound), ns, or None;
        like timer_s, it may change only in the hooks."""
        return None

    def on_app_timer(self, now_ns: int) -> None:
        pass

    def receive(self, payload: bytes, peer: tuple[str, int], now_s: float, now_ns: int) -> None:
        raise NotImplementedError

    def flush(self, now_s: float, now_ns: int) -> list[bytes]:
        """Datagrams (UDP payloads) the stack sends now."""
        raise NotImplementedError

    def finished(self) -> bool:
        """Whether this host's part of the run is over (the client decides the end)."""
        return False


def timer_ns(host: Host, t: float | None) -> int | None:
    """The instant at which `host`'s protocol timer `t` (s) fires, with the t+1 guard."""
    if t is None or math.isinf(t):
        return None
    at = max(math.ceil(t * 1e9), 0)
    if host.fired is not None and host.fired[0] == t and at <= host.fired[1]:
        at = host.fired[1] + 1
    return at


class EventLoop:
    """Runs `client` and `server` over `link` (a longlook_link.Link) until the
    client is finished or `until_ns` passes."""

    def __init__(self, link, client: Host, server: Host, clock: Clock | None = None):
        self.link = link
        self.clock = clock if clock is not None else Clock()
        self.hosts = {"c2s": client, "s2c": server}
        self.receiver = {"c2s": server, "s2c": client}
        #: The (address, port) a datagram going in each direction comes from.
        self.source = {d: (h.addr, h.port) for d, h in self.hosts.items()}
        self.steps = 0
        #: Hosts that received, fired or woke at this instant: only they can have
        #: something new to send (asking an idle stack costs as much as a send).
        self.touched = set(self.hosts)
        #: Each host's (timer_s(), timer_ns(), app_deadline_ns()) since the loop
        #: last called into it: asking aioquic walks its packet spaces, and the
        #: loop needs the values up to four times per instant.
        self.timers = dict.fromkeys(self.hosts, _STALE)

    def run(self, until_ns: int) -> bool:
        """True when the client finished, False when `until_ns` came first."""
        # What was alive before the run (modules, and under pytest Hypothesis's and
        # pytest's state) outlives it: set aside from the cyclic collector while
        # the run allocates, its full passes walk only the run's own objects
        # (~2.5% of a run's CPU in bench/virtual_bench.py). A caller's own freeze
        # is left as it was.
        thaw = gc.get_freeze_count() == 0
        if thaw:
            gc.freeze()
        try:
            return self._run(until_ns)
        finally:
            if thaw:
                gc.unfreeze()

    def _run(self, until_ns: int) -> bool:
        client = self.hosts["c2s"]
        self._flush()
        while not client.finished():
            t = self._next_time()
            if t is None:
                raise VirtualTimeError(f"at {self.now_ns / 1e9:.6f} s nothing is scheduled but the "
                                       f"{client.name} is not finished (a stack or application bug)")
            if t > until_ns:
                self.clock.ns = until_ns
                return False
            if t > self.clock.ns:
                self.clock.ns = t
            self._step()
        return True

    @property
    def now_ns(self) -> int:
        """Virtual time, ns since the link's start (the clock's)."""
        return self.clock.ns

    def _timer(self, direction: str) -> tuple[float | None, int | None, int | None]:
        """The host's protocol timer (s), the instant it fires at (ns), and its
        application's timer (ns)."""
        timer = self.timers[direction]
        if timer is _STALE:
            host = self.hosts[direction]
            t = host.timer_s()
            timer = self.timers[direction] = (t, timer_ns(host, t), host.app_deadline_ns())
        return timer

    def _next_time(self) -> int | None:
        best = self.link.next_deadline()
        for direction in self.hosts:
            _, at, app = self._timer(direction)
            if at is not None and (best is None or at < best):
                best = at
            if app is not None and (best is None or app < best):
                best = app
        return best

    def _step(self) -> None:
        now = self.clock.ns
        self.steps += 1
        touched, timers = self.touched, self.timers
        for direction, payload, marks in self.link.poll_due(now):
            host = self.receiver[direction]
            if marks & longlook_link.CORRUPT:
                # A flipped payload bit breaks the UDP checksum: the kernel would drop it.
                host.counters["corrupt_dropped"] += 1
                continue
            host.counters["received"] += 1
            back = REVERSE[direction]  # the receiver sends the other way
            touched.add(back)
            timers[back] = _STALE
            host.receive(payload, self.source[direction], host.clock_s(now), now)
        fired = []
        for name, host in self.hosts.items():
            t, at, app = self._timer(name)
            if at is not None and at <= now:
                timers[name] = _STALE
                host.on_timer(host.clock_s(now, t), now)
                host.fired = (t, now)
                fired.append((name, t))
                touched.add(name)
                app = host.app_deadline_ns()  # handling the timer may have moved it
            if app is not None and app <= now:
                timers[name] = _STALE
                host.on_app_timer(now)
                touched.add(name)
        self._flush()
        for name, t in fired:
            self._check_stuck(name, t, now)

    def _check_stuck(self, direction: str, t: float, now: int) -> None:
        """Counts firings after which the same timer is still due (after the host
        also had its chance to send, which is what clears ack and pacing timers)."""
        host = self.hosts[direction]
        after = self._timer(direction)[0]
        if after == t and math.ceil(t * 1e9) <= now:
            host.stuck += 1
            if host.stuck >= STUCK_LIMIT:
                raise VirtualTimeError(f"{host.name}: timer {t!r} s still due after {host.stuck} firings "
                                       f"(virtual time {now} ns); the stack does not clear it")
        else:
            host.stuck = 0

    def _flush(self) -> None:
        now = self.clock.ns
        for direction in ("c2s", "s2c"):
            if direction not in self.touched:
                continue
            host = self.hosts[direction]
            self.timers[direction] = _STALE
            payloads = host.flush(host.clock_s(now), now)
            if payloads:
                host.counters["sent"] += len(payloads)
                self.link.send(now, direction, self.source[direction], self.source[REVERSE[direction]], payloads)
        self.touched.clear()
