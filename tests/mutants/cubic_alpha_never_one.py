"""Mutant: CUBIC whose Reno-friendly estimate grows α_cubic ≈ 0.53 datagram per round
trip for ever, never 1 (RFC 9438 §4.3: "Once W_est has grown to reach the cwnd at the
time of most recently setting ssthresh ... the sender SHOULD set α_cubic to 1"). Past
the window it was cut from it keeps growing at about half of Reno's pace.

On aioquic's CUBIC, whose W_est grows by `additive_increase_factor` (one datagram: α
of 1 throughout) times the bytes acknowledged over the window: the factor is
α_cubic's.
"""

from aioquic.quic.congestion.cubic import K_CUBIC_LOSS_REDUCTION_FACTOR as BETA
from aioquic.quic.congestion.cubic import CubicCongestionControl

ALPHA_CUBIC = 3 * (1 - BETA) / (1 + BETA)


class CubicAlphaNeverOne(CubicCongestionControl):
    longlook_family = "cubic"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        self.additive_increase_factor = ALPHA_CUBIC * max_datagram_size
