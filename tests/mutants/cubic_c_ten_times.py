"""Mutant: CUBIC with C = 4, ten times RFC 9438 §5.1's 0.4 ("C SHOULD be set to
0.4"): the curve after a cut is ten times as steep, and the window races back to
the old W_max and past it.

aioquic's CUBIC reads its constant from the module (`K_CUBIC_C`, in W_cubic and
in K) when it computes, so the constructor patches it (tests/mutants/_patch.py).
"""

from aioquic.quic.congestion import cubic
from aioquic.quic.congestion.cubic import CubicCongestionControl

from ._patch import patch


class CubicCTenTimes(CubicCongestionControl):
    longlook_family = "cubic"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(cubic, "K_CUBIC_C", 4.0)
