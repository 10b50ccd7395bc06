"""Mutant: the probes a PTO sends past the congestion window are left out of bytes in
flight (RFC 9002 §7.5: "A sender MUST however count these packets as being
additionally in flight"). A sender with this bug under-counts its flight by a probe
at each PTO, so a blackhole lets it send more than its window once ACKs return.

aioquic counts a packet in flight in QuicPacketRecovery.on_packet_sent, outside the
controller; the constructor patches it and the PTO handler,
QuicPacketRecovery.reschedule_data (tests/mutants/_patch.py says why). The first
two packets in flight sent after a PTO expiry are its probes: each is sent as usual
and then taken out of the flight, as if never counted, so neither its
acknowledgement nor its loss subtracts it again. (Not "a packet past the window":
aioquic's PTO declares its oldest packet lost first, F28, so its probe fits.)
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch

#: Packets in flight after each PTO expiry left out of bytes in flight.
PROBES = 2
_stock_reschedule = recovery.QuicPacketRecovery.reschedule_data
_stock_on_sent = recovery.QuicPacketRecovery.on_packet_sent


def _reschedule(self, *, now: float, speed_up_handshake: bool = False) -> None:
    _stock_reschedule(self, now=now, speed_up_handshake=speed_up_handshake)
    if self.handshake_confirmed:
        self._mutant_uncounted = PROBES


def _on_sent(self, *, packet, space) -> None:
    _stock_on_sent(self, packet=packet, space=space)
    if packet.in_flight and getattr(self, "_mutant_uncounted", 0):
        self._mutant_uncounted -= 1
        self._cc.bytes_in_flight -= packet.sent_bytes
        packet.in_flight = False


class ProbesNotInFlight(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketRecovery, "reschedule_data", _reschedule)
        patch(recovery.QuicPacketRecovery, "on_packet_sent", _on_sent)
