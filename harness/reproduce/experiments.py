"""The seed studies' experiments as data: their conditions and their published figures.

Each experiment is a sweep of one link parameter (loss, RTT, rate) around fixed
conditions, with the figures its authors published for each point
(../shared/reference/seed-results.md holds them with their sources). The figures are
facts carried over as numbers; `tests/test_reproduce.py` holds each condition against
the stated conditions of its study.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MBIT = 1_000_000
MB = 1_000_000


@dataclass(frozen=True)
class Point:
    """One condition of a sweep and, where published, its figures."""

    #: The swept value, in the unit of the experiment's `axis` (%, ms or Mbit/s).
    x: float
    rate_bps: int
    rtt_us: int
    loss: float
    #: Published figures per column of the study: (seconds, Mbit/s) per protocol for a
    #: "transfer" experiment ("QUIC", "HTTP"); (mean, sd) Mbit/s per flow for a "share"
    #: experiment ("QUIC", "TCP 1", "TCP 2", ...).
    published: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Kernel TCP CUBIC flows competing with the transfer (iperf3, started first).
    tcp_flows: int = 0
    #: Jitter each way: each packet gets [0, jitter_us] µs more, order kept
    #: unless `reorders` (then a later packet may overtake an earlier one).
    jitter_us: int = 0
    reorders: bool = False
    #: A sudden drop of the rate each way to `drop_to_bps` at `drop_at_us` (0: none).
    drop_to_bps: int = 0
    drop_at_us: int = 0
    #: The download split into this many equal objects, all requested at once on one
    #: connection (0 or 1: one object).
    objects: int = 0
    #: This point's download size, where the sweep varies it (0: the experiment's).
    size_bytes: int = 0
    #: A ceiling on the sender's congestion window, in datagrams of WINDOW_CAP_DATAGRAM
    #: bytes (LL_MAX_WINDOW; 0: none), for the stacks that can take one.
    window_cap_packets: int = 0


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    source: str
    #: What the sweep varies, as the study's table heads it.
    axis: str
    size_bytes: int
    points: tuple[Point, ...]
    #: Runs per point by default (the study's own count where it gives one).
    runs: int
    #: The swept values `--quick` keeps (one run each).
    quick: tuple[float, ...]
    #: The drop-tail queue, bytes; None: one BDP (at least 10 full-size packets).
    queue_bytes: int | None = None
    notes: str = ""
    #: "transfer": time and goodput of the download alone; "share": each flow's
    #: average throughput while the transfer competes with `tcp_flows` TCP flows;
    #: "objects": when each of the download's objects completed; "pairs": two
    #: downloads of different stacks at once (TransferPlan.rival), each one's
    #: throughput while both send and the loser's share of its fair share.
    measure: str = "transfer"
    #: The controller the study ran, used where a stack has it and --cc says nothing.
    cc: str | None = None
    #: Measured in real time only: what it measures (CPU per side) has no meaning in
    #: virtual time, where both endpoints share one process.
    real_time: bool = False
    #: The drop-tail queue in BDPs where `queue_bytes` is None.
    queue_bdps: float = 1.0
    #: "pairs" experiments: the rivals every stack meets besides the other --impl
    #: stacks ("stack:cc"), e.g. kernel TCP with each of its controllers.
    rivals: tuple[str, ...] = ()
    #: Each stack whose endpoints can switch their segmentation offloads (GSO, GRO)
    #: runs twice: as it comes, and with them off (a "-no-offload" column).
    offload_both: bool = False

    def point(self, x: float) -> Point:
        return next(p for p in self.points if p.x == x)


def _connectify(name: str, title: str, axis: str, rows, make, quick) -> Experiment:
    points = tuple(Point(x, *make(x), published={"QUIC": (qt, qm), "HTTP": (ht, hm)})
                   for x, qt, qm, ht, hm in rows)
    return Experiment(
        name=name, title=title,
        source="Connectify blog, \"Taking Google's QUIC for a test drive\" (2013): a 10 MB file "
               "through an OpenWrt router emulating the WAN",
        axis=axis, size_bytes=10 * MB, points=points, runs=3, quick=quick,
        notes="the 2013 QUIC was Chromium's gQUIC with 1 ms pacing (capped near 9 Mbit/s); "
              "HTTP was HTTPS over kernel TCP, as our baseline `tcp` is (TLS 1.3 over kernel TCP)")


#: Connectify's loss sweep: RTT 160 ms, 5 Mbit/s each way. (loss %, QUIC s, QUIC Mbit/s, HTTP s, HTTP Mbit/s)
CONNECTIFY_LOSS = _connectify(
    "connectify-loss", "time and goodput of a 10 MB download against random loss", "loss %",
    [(0, 18.59, 4.303, 18.288, 4.374), (0.1, 25.157, 3.180, 18.282, 4.375),
     (0.5, 40.305, 1.984, 69.794, 1.146), (1, 72.257, 1.107, 113.974, 0.701),
     (3, 131.707, 0.607, 218.725, 0.365), (5, 186.784, 0.428, 290.036, 0.275)],
    lambda x: (5 * MBIT, 160_000, x / 100), quick=(0, 1))

#: RTT sweep: 10 Mbit/s, no loss.
CONNECTIFY_RTT = _connectify(
    "connectify-rtt", "time and goodput of a 10 MB download against round-trip time", "RTT ms",
    [(80, 11.476, 6.971, 9.15, 8.743), (160, 11.907, 6.718, 9.763, 8.194),
     (320, 15.41, 5.191, 11.314, 7.070), (480, 22.974, 3.482, 13.389, 5.975),
     (640, 36.167, 2.211, 16.515, 4.844), (800, 43.206, 1.851, 19.397, 4.124)],
    lambda x: (10 * MBIT, int(x * 1000), 0.0), quick=(80, 480))

#: Bandwidth sweep: RTT 20 ms, no loss.
CONNECTIFY_RATE = _connectify(
    "connectify-rate", "time and goodput of a 10 MB download against the bottleneck rate", "Mbit/s",
    [(2, 44.751, 1.787, 45.329, 1.764), (5, 18.075, 4.426, 17.597, 4.546),
     (10, 10.793, 7.412, 8.831, 9.058), (20, 9.423, 8.489, 4.477, 17.869),
     (30, 9.341, 8.564, 3.025, 26.446), (50, 9.232, 8.665, 1.881, 42.530),
     (70, 9.248, 8.650, 1.459, 54.832)],
    lambda x: (int(x * MBIT), 20_000, 0.0), quick=(10, 50))

#: The QUIC Interop Runner's goodput measurement: 10 MB, 10 Mbit/s, 30 ms RTT, a
#: 25-packet queue, 5 runs, mean ± sd. It publishes no fixed figure (its matrix is
#: live), so the table has no published column.
QIR_GOODPUT = Experiment(
    name="qir-goodput", title="the Interop Runner's goodput test", axis="Mbit/s",
    source="QUIC Interop Runner, measurement G (goodput): 10 MB, 10 Mbit/s, 30 ms RTT, 25-packet queue, 5 runs",
    size_bytes=10 * MB, points=(Point(10, 10 * MBIT, 30_000, 0.0),), runs=5, quick=(10,),
    queue_bytes=25 * 1500, notes="the runner reports mean ± sd over 5 runs; a cell here gives the median, [min–max, sd]")

#: Gordo & Tatsis (KTH 2015): a sudden drop to 10 % of a 40 Mbit/s link at each delay
#: of their grid; 10 runs each for drops. They publish findings, not a table of figures
#: ("QUIC better after bandwidth drops"): the published column is empty.
GORDO_DROP = Experiment(
    name="gordo-drop", title="a sudden drop from 40 to 4 Mbit/s, per delay", axis="RTT ms",
    source="Gordo & Tatsis, \"QUIC compared to TCP+TLSv1.2\", KTH 2015: a drop to 10 % of the bandwidth "
           "(40 Mbit/s) for every delay of 10-120 ms, 10 runs",
    size_bytes=10 * MB, runs=10, quick=(20, 120),
    points=tuple(Point(d, 40 * MBIT, 2 * d * 1000, 0.0, drop_to_bps=4 * MBIT, drop_at_us=1_000_000)
                 for d in (10, 20, 40, 60, 80, 100, 120)),
    notes="the study's delay is one way: the RTT here is twice it; the drop comes 1 s after the link is ready "
          "(about half the 10 MB at 40 Mbit/s), and the queue is one BDP of the 40 Mbit/s link")

#: Gordo & Tatsis: jitter 0-50 ms at 60 ms delay and 100 Mbit/s.
GORDO_JITTER = Experiment(
    name="gordo-jitter", title="jitter at 60 ms delay and 100 Mbit/s", axis="jitter ms",
    source="Gordo & Tatsis, KTH 2015: jitter 0, 10, 20, 40, 50 ms at 60 ms delay, 100 Mbit/s, 5 runs",
    size_bytes=10 * MB, runs=5, quick=(0, 50),
    points=tuple(Point(j, 100 * MBIT, 120_000, 0.0, jitter_us=j * 1000) for j in (0, 10, 20, 40, 50)),
    notes="the study found QUIC hitting a throughput ceiling with high delay and jitter, where TCP did "
          "better; jitter here keeps packet order (the emulator's jitter_reorders off), as netem's did "
          "not, so it tests delay variation, not reordering")

#: Yu & Benson (WWW 2021): production stacks multiplex streams differently (sequential,
#: round-robin, batched round-robin). Here: 1 MB in N equal objects requested at once
#: on one connection; when each completes says which strategy the server follows.
YU_MULTIPLEXING = Experiment(
    name="yu-multiplexing", title="many objects on one connection: completion times and order", axis="objects",
    source="Yu & Benson, \"Dissecting Performance of Production QUIC\", WWW 2021: stream multiplexing "
           "strategies differ (Cloudflare sequential, Facebook round-robin, Google batched round-robin)",
    size_bytes=1 * MB, runs=3, quick=(10, 100),
    points=tuple(Point(n, 20 * MBIT, 40_000, 0.0, objects=n) for n in (10, 50, 100, 200)),
    measure="objects",
    notes="a cell: time to last byte; the median object's completion as a share of it (about 0.5: one "
          "object after another; near 1: round-robin, all finish together); and how far completion follows "
          "request order (Kendall's tau: 1 in order, 0 unrelated)")

#: Zhang et al. (WWW 2024): at 1 Gbit/s QUIC falls behind TCP and the receiver's CPU
#: saturates. Buffers 10 x BDP, CUBIC, 50 MB to 1 GB; goodput and CPU per side.
ZHANG_1GBIT = Experiment(
    name="zhang-1gbit", title="downloads at 1 Gbit/s: goodput and CPU per side", axis="MB",
    source="Zhang et al., \"QUIC is not Quick Enough over Fast Internet\", WWW 2024: 1 Gbit/s, CUBIC, "
           "buffers 10x BDP, 50 MB-1 GB; 1 GB took QUIC 18.6 s and HTTP/2 9.36 s",
    size_bytes=50 * MB, runs=3, quick=(50,), cc="cubic", real_time=True, offload_both=True,
    points=(Point(50, 1000 * MBIT, 2_000, 0.0, size_bytes=50 * MB),
            Point(100, 1000 * MBIT, 2_000, 0.0, size_bytes=100 * MB),
            Point(500, 1000 * MBIT, 2_000, 0.0, size_bytes=500 * MB),
            Point(1000, 1000 * MBIT, 2_000, 0.0, size_bytes=1000 * MB,
                  published={"QUIC": (18.6, round(8000 / 18.6, 1)), "HTTP": (9.36, round(8000 / 9.36, 1))})),
    queue_bytes=10 * 1000 * MBIT * 2_000 // 8_000_000,
    notes="the study's RTT on the LAN was 0.23 ms (ping); 2 ms here keeps the emulator's delay accurate. A cell "
          "adds each side's CPU (% of one core) over the transfer. Each stack runs as it comes (its own GSO/GRO "
          "default) and, where both its endpoints declare the switch (caps.json honours.offload: quic-go, quinn, "
          "s2n-quic), again with them off (LL_OFFLOAD=off: the \"-no-offload\" column). The published Mbit/s "
          "are 1 GB over the published times")

#: Kakhki et al., Table 4: QUIC against 1, 2 and 4 TCP CUBIC flows; 5 Mbit/s, 36 ms RTT,
#: a 30 KB buffer, 10 runs, each flow's average throughput, Mbit/s: (mean, sd).
KAKHKI_FAIRNESS = Experiment(
    name="kakhki-fairness", title="QUIC against competing TCP CUBIC flows (Table 4)", axis="TCP flows",
    source="Kakhki et al., \"Taking a Long Look at QUIC\", IMC 2017, Table 4: 5 Mbit/s, 36 ms RTT, "
           "30 KB buffer, average of 10 runs",
    size_bytes=10 * MB, runs=10, quick=(1, 4), queue_bytes=30_000, measure="share", cc="cubic",
    points=tuple(Point(n, 5 * MBIT, 36_000, 0.0, tcp_flows=n, published=pub) for n, pub in (
        (1, {"QUIC": (2.71, 0.46), "TCP 1": (1.62, 1.27)}),
        (2, {"QUIC": (2.8, 1.16), "TCP 1": (0.7, 0.21), "TCP 2": (0.96, 0.3)}),
        (4, {"QUIC": (2.75, 1.2), "TCP 1": (0.45, 0.14), "TCP 2": (0.36, 0.09), "TCP 3": (0.41, 0.11),
             "TCP 4": (0.45, 0.13)}))),
    notes="both sides CUBIC; the 2017 QUIC (gQUIC 34/37) emulated two connections in version 34. "
          "Today's TCP flows are iperf3 streams started 2 s before the QUIC download (10 MB here; the "
          "paper's object size for this table is not given); each flow's throughput is taken while the "
          "download runs. The published TCP flows are listed as the paper gives them, today's largest first")

#: The Interop Runner's crosstraffic measurement: 25 MB against one iperf TCP CUBIC
#: flow on the goodput test's link. The runner reports only the QUIC side; this
#: table gives both flows. No fixed published figure (the matrix is live).
QIR_CROSSTRAFFIC = Experiment(
    name="qir-crosstraffic", title="the Interop Runner's crosstraffic test, both flows", axis="TCP flows",
    source="QUIC Interop Runner, measurement C (crosstraffic): 25 MB against one iperf TCP CUBIC flow, "
           "10 Mbit/s, 30 ms RTT, 25-packet queue, 5 runs",
    size_bytes=25 * MB, points=(Point(1, 10 * MBIT, 30_000, 0.0, tcp_flows=1),), runs=5, quick=(1,),
    queue_bytes=25 * 1500, measure="share",
    notes="the runner reports only the QUIC flow's goodput; the TCP flow's is the half it leaves out")

#: The datagram a window cap is counted in, bytes: the contract's default datagram size.
WINDOW_CAP_DATAGRAM = 1252

#: Kakhki et al. (IMC'17): Google QUIC's maximum congestion window of 107 packets
#: (raised to 430 to match Google's servers) limited its throughput on paths whose
#: bandwidth-delay product exceeds it. They state the finding, not a table: the
#: published column is empty. Their grid reached 100 Mbit/s and 100 ms extra delay;
#: there the BDP is about 1000 datagrams, and a cap of W datagrams allows at most
#: W · 1252 B per round trip (107: 10.7 Mbit/s; 430: 43 Mbit/s).
KAKHKI_WINDOW_CAP = Experiment(
    name="kakhki-window-cap", title="a maximum congestion window on a high-BDP link", axis="cap (datagrams; 0: none)",
    source="Kakhki et al., \"Taking a Long Look at QUIC\", IMC 2017: a maximum congestion window of 107 packets "
           "by default (raised to 430 to match Google's servers) capped QUIC's throughput at high BDP",
    size_bytes=20 * MB, runs=3, quick=(107, 0),
    points=tuple(Point(w, 100 * MBIT, 100_000, 0.0, window_cap_packets=w) for w in (107, 430, 0)),
    notes="100 Mbit/s, 100 ms RTT (BDP about 1000 datagrams), a one-BDP queue; the cap is LL_MAX_WINDOW = cap × "
          "1252 B on the sender, for stacks whose endpoint declares it (caps.json honours.max_window: aioquic); "
          "the others, kernel TCP among them, are unsupported at a capped point and run at 0. A cap of W datagrams "
          "allows at most W × 1252 B per round trip: 10.7 Mbit/s at 107, 43 Mbit/s at 430")

#: Prudentia (SIGCOMM'24): every pair of services on one bottleneck, 8 and 50 Mbit/s,
#: 50 ms RTT, a 4-BDP drop-tail queue; the loser's throughput as a share of its
#: max-min fair share (half the link). Across live services the loser got 72 % on
#: average: a summary, not per pair, so the published column is empty.
PRUDENTIA_FAIRNESS = Experiment(
    name="prudentia-fairness", title="pairwise fairness: the loser's share of its fair share", axis="Mbit/s",
    source="Prudentia (Mishra et al., SIGCOMM 2024): pairs of live services on an 8 or 50 Mbit/s bottleneck, "
           "50 ms RTT, 4 x BDP drop-tail; the losing service got 72 % of its max-min fair share on average",
    size_bytes=10 * MB, runs=3, quick=(8,), measure="pairs", queue_bdps=4.0, real_time=True,
    rivals=("tcp:cubic", "tcp:bbr"),
    points=(Point(8, 8 * MBIT, 50_000, 0.0, size_bytes=10 * MB), Point(50, 50 * MBIT, 50_000, 0.0, size_bytes=40 * MB)),
    notes="each pair starts its two downloads together, from two servers on one host to two clients on the other "
          "(the rival's on port 4434); throughput is each flow's bytes leaving the bottleneck while both send, "
          "and the loser's share is the lesser of the two over half the link's rate. The rivals are the other "
          "--impl stacks and kernel TCP with CUBIC and with BBR (the `tcp` stack, TLS over TCP). Sizes: 10 MB at "
          "8 Mbit/s, 40 MB at 50 Mbit/s (about 20 and 13 s at a fair share); Prudentia ran live services for minutes")

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (CONNECTIFY_LOSS, CONNECTIFY_RTT, CONNECTIFY_RATE, QIR_GOODPUT,
                                                          QIR_CROSSTRAFFIC, KAKHKI_FAIRNESS, KAKHKI_WINDOW_CAP,
                                                          GORDO_DROP, GORDO_JITTER, YU_MULTIPLEXING, ZHANG_1GBIT,
                                                          PRUDENTIA_FAIRNESS)}

#: The issue's other experiments, not runnable yet, and what each needs first.
PLANNED: dict[str, str] = {}


class ExperimentError(ValueError):
    """An unknown experiment; the message lists the known ones."""


def get(name: str) -> Experiment:
    if name in EXPERIMENTS:
        return EXPERIMENTS[name]
    if name in PLANNED:
        raise ExperimentError(f"{name}: not runnable yet ({PLANNED[name]}); runnable: {', '.join(EXPERIMENTS)}")
    raise ExperimentError(f"unknown experiment {name!r}; `longlook reproduce --list` lists them: "
                          f"{', '.join(EXPERIMENTS)}")
