"""Mutant: a loss halves the window but leaves ssthresh as it was, so slow start
resumes after recovery and doubles the window per RTT into the next loss
(RFC 9002 §7.3.2 sets ssthresh to the reduced window).

Source: Kakhki et al. (IMC'17) found a QUIC whose ssthresh was not maintained as
intended (not updated from the receiver's window); this is the loss-side variant.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl


class SsthreshNeverSet(RenoCongestionControl):
    longlook_family = "newreno"

    def on_packets_lost(self, *, now, packets) -> None:
        kept = self.ssthresh
        super().on_packets_lost(now=now, packets=packets)
        self.ssthresh = kept
