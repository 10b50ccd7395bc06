"""Mutant: each PTO expiry lets four more datagrams than the window allows into
flight, so a probe burst holds up to five datagrams (RFC 9002 §6.2.4: at most two).

aioquic's PTO handling (QuicPacketRecovery.reschedule_data) and the window the
connection reads (QuicPacketRecovery.congestion_window) live outside the
controller; the constructor patches them (tests/mutants/_patch.py says why).
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch

#: Datagrams a PTO may add to flight beyond the window, besides the probe itself.
EXTRA_PROBES = 4
_stock_reschedule = recovery.QuicPacketRecovery.reschedule_data
_stock_on_sent = recovery.QuicPacketRecovery.on_packet_sent


def _reschedule(self, *, now: float, speed_up_handshake: bool = False) -> None:
    _stock_reschedule(self, now=now, speed_up_handshake=speed_up_handshake)
    if self.handshake_confirmed:
        self._mutant_extra_probes = EXTRA_PROBES


def _window(self) -> int:
    extra = getattr(self, "_mutant_extra_probes", 0)
    if extra:
        return max(self._cc.congestion_window, self._cc.bytes_in_flight + extra * self._cc._max_datagram_size)
    return self._cc.congestion_window


def _on_sent(self, *, packet, space) -> None:
    _stock_on_sent(self, packet=packet, space=space)
    if packet.in_flight and getattr(self, "_mutant_extra_probes", 0):
        self._mutant_extra_probes -= 1


class ProbeBurstOfFive(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketRecovery, "reschedule_data", _reschedule)
        patch(recovery.QuicPacketRecovery, "congestion_window", property(_window))
        patch(recovery.QuicPacketRecovery, "on_packet_sent", _on_sent)
