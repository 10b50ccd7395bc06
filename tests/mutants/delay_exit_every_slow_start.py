"""Mutant: NewReno with a HyStart++-like delay-based exit in every slow start, not only
the first (RFC 9406 §4.3: "An implementation SHOULD use HyStart++ only for the initial
slow start"): after persistent congestion's collapse it leaves slow start as soon as
the round trip rises, far below the ssthresh the congestion event set.

The first slow start is aioquic's own (its RTT monitor). In each slow start after a
collapse the exit follows RFC 9406 §4.2's threshold without its rounds: once
RTT_SAMPLES samples in a row exceed the least RTT seen since the collapse by RttThresh
(an eighth of it, 4 to 16 ms), ssthresh becomes the window.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl

#: Samples in a row above the threshold before the exit (HyStart++'s N_RTT_SAMPLE).
RTT_SAMPLES = 8


class DelayExitEverySlowStart(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        self._collapsed = False
        self._least_rtt: float | None = None
        self._above = 0

    def on_persistent_congestion(self) -> None:
        super().on_persistent_congestion()
        self._collapsed, self._least_rtt, self._above = True, None, 0

    def on_rtt_measurement(self, *, now: float, rtt: float) -> None:
        if not self._collapsed:
            super().on_rtt_measurement(now=now, rtt=rtt)
            return
        if self.ssthresh is not None and self.congestion_window >= self.ssthresh:
            return
        if self._least_rtt is None or rtt < self._least_rtt:
            self._least_rtt = rtt
        threshold = max(0.004, min(self._least_rtt / 8, 0.016))
        self._above = self._above + 1 if rtt >= self._least_rtt + threshold else 0
        if self._above >= RTT_SAMPLES:
            self.ssthresh = self.congestion_window
            self._above = 0
