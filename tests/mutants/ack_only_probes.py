"""Mutant: every other PTO expiry after the handshake sends an ACK-only datagram as
its probe, with no PING and no data (RFC 9002 §6.2.4: all probe packets MUST be
ack-eliciting). The probes in between are the stock ones, so the transfer still
recovers from a blackhole.

aioquic's PTO handling (QuicPacketRecovery.reschedule_data) lives outside the
controller; the constructor patches it (tests/mutants/_patch.py says why).
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch

_stock_reschedule = recovery.QuicPacketRecovery.reschedule_data


def _reschedule(self, *, now: float, speed_up_handshake: bool = False) -> None:
    if self.handshake_confirmed and self._pto_count % 2 == 1:
        # An ACK frame is all the connection will send: nothing rescheduled, no PING.
        for space in self.spaces:
            if space.is_application_data:
                space.ack_at = now
        return
    _stock_reschedule(self, now=now, speed_up_handshake=speed_up_handshake)


class AckOnlyProbes(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketRecovery, "reschedule_data", _reschedule)
