"""Mutant: a flight the pacer holds below the window counts as application limited.
On every acknowledgement the controller asks whether the flight before it filled
the window (within two datagrams); if not, it does not grow, as if the application
had nothing to send (RFC 9002 §7.8: "A sender SHOULD NOT consider itself application
limited if it would have fully utilized the congestion window without pacing delay").

aioquic paces (QuicPacketPacer at about the window per smoothed RTT), so in slow
start its flight trails a window that doubles every round trip: this mutant then
barely grows. On aioquic's NewReno.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl


class PacedAsAppLimited(RenoCongestionControl):
    longlook_family = "newreno"

    def on_packet_acked(self, *, now: float, packet) -> None:
        if self.bytes_in_flight < self.congestion_window - 2 * self._max_datagram_size:
            self.bytes_in_flight -= packet.sent_bytes
            return
        super().on_packet_acked(now=now, packet=packet)
