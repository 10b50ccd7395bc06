"""The RFCs' constants, in one place every room may read: the congestion-control
families and their kLossReductionFactor, the loss-detection thresholds.

RFC 9002 calls its constants examples or recommendations; where a value here is a
recommendation, the comment says so, and the properties that use it say which rule
they judge. Nothing here knows a stack, a testbed or a run."""

#: kLossReductionFactor of each family (RFC 9002 §7.3.2 for NewReno, RFC 9438 §4.6
#: for CUBIC). A controller is judged by its family's β, never by the one its
#: factory claims: a mutant that claims β 0.9 must still fail.
FAMILY_BETA = {"newreno": 0.5, "cubic": 0.7}

#: kPacketThreshold (RFC 9002 §6.1.1, RECOMMENDED 3): reordering by fewer packets is not loss.
K_PACKET_THRESHOLD = 3

#: kTimeThreshold (RFC 9002 §6.1.2, RECOMMENDED 9/8): a packet sent this many RTTs
#: (the larger of smoothed_rtt and latest_rtt) before a later one was acknowledged is lost.
K_TIME_THRESHOLD = 9 / 8

#: kGranularity (RFC 9002 §6.1.2, RECOMMENDED 1 ms), µs: the timer's resolution.
K_GRANULARITY_US = 1_000

#: QUIC's smallest maximum datagram size (RFC 9000 §14), bytes.
MIN_DATAGRAM = 1200
#: RFC 9002 §7.2's cap on the initial window when ten datagrams would exceed it, bytes.
IW_CAP = 14720


def initial_window(max_datagram_size: int) -> int:
    """RFC 9002 §7.2's initial window (RECOMMENDED): ten times max_datagram_size,
    capped at max(14720, twice it)."""
    return min(10 * max_datagram_size, max(IW_CAP, 2 * max_datagram_size))


#: CUBIC's C (RFC 9438 §5.1, RECOMMENDED 0.4), in datagrams per second cubed.
CUBIC_C = 0.4


def cubic_window(t_s: float, w_max: float, cwnd_epoch: float, mss: int, c: float = CUBIC_C) -> float:
    """RFC 9438 §4.2's W_cubic(t), bytes: the cubic curve through `cwnd_epoch` at
    t = 0 (the reduction) with its plateau at `w_max` (bytes), t seconds of
    congestion avoidance later; K = cbrt((W_max - cwnd_epoch) / C) in datagrams.
    `c`: the curve's constant (RFC 9438 §5.1's 0.4 unless a property asks another)."""
    w_max_d, epoch_d = w_max / mss, cwnd_epoch / mss
    k = max(w_max_d - epoch_d, 0.0) ** (1 / 3) / c ** (1 / 3)
    return (c * (t_s - k) ** 3 + w_max_d) * mss


def reno_friendly_alpha(beta: float) -> float:
    """RFC 9438 §4.3's α_cubic = 3(1 - β) / (1 + β), datagrams per round trip (0.53
    for β 0.7) until W_est reaches W_max, 1 after."""
    return 3 * (1 - beta) / (1 + beta)
