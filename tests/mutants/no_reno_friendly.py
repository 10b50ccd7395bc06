"""Mutant: CUBIC without its Reno-friendly region (RFC 9438 §4.3: when W_est exceeds
W_cubic, "cwnd SHOULD be set to W_est"). On a link of small bandwidth-delay product
the curve is nearly flat for seconds after each cut, so the window grows far slower
than Reno's would; the rules on cuts and on growth's upper bound do not see it.

On aioquic's CUBIC: the region's test always answers no, so the concave and convex
formulas alone set the window.
"""

from aioquic.quic.congestion.cubic import CubicCongestionControl


class NoRenoFriendly(CubicCongestionControl):
    longlook_family = "cubic"

    def is_reno_friendly(self, t: float) -> bool:
        return False
