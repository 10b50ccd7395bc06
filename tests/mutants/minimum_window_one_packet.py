"""Mutant: a minimum window of one datagram instead of kMinimumWindow = 2 ×
max_datagram_size (RFC 9002 §7.2), on loss and on persistent congestion.

Source: TCP's loss window after a retransmission timeout is one segment
(RFC 5681 §3.1); a port of that rule into QUIC breaks §7.2, which keeps two so
that a lone ACK-eliciting packet never waits for a delayed ACK.
"""

from tests.mutants._reno import ParametrisedReno


class MinimumWindowOnePacket(ParametrisedReno):
    minimum_window_datagrams = 1

    def on_persistent_congestion(self) -> None:
        self.congestion_window = self._max_datagram_size
        self._congestion_recovery_start_time = 0.0
