"""Mutant: CUBIC without a delay-based exit from slow start (RFC 9438 §4.10: "CUBIC
SHOULD use the HyStart++ slow start algorithm"). On a deep queue slow start then
runs on until the queue overflows, however far the round trip has risen.

aioquic's CUBIC leaves its first slow start when its RTT monitor sees the round trip
rise; this mutant keeps the sample and never asks the monitor.
"""

from aioquic.quic.congestion.cubic import CubicCongestionControl


class CubicNoDelayExit(CubicCongestionControl):
    longlook_family = "cubic"

    def on_rtt_measurement(self, *, now: float, rtt: float) -> None:
        self.rtt = rtt
