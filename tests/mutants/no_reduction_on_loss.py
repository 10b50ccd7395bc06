"""Mutant: NewReno that never reduces its window on loss; lost packets only leave
the flight (RFC 9002 §7.3.2 requires entering recovery and cutting to β·cwnd).

The classic bug of a sender that treats loss as a retransmission trigger and
nothing more; persistent congestion (§7.6.2) still collapses the window, so only
the per-loss reaction is missing.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl


class NoReductionOnLoss(RenoCongestionControl):
    longlook_family = "newreno"

    def on_packets_lost(self, *, now, packets) -> None:
        for packet in packets:
            self.bytes_in_flight -= packet.sent_bytes
