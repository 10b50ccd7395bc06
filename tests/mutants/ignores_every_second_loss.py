"""Mutant: every second application packet that loss detection finds lost is dropped
quietly: its data is queued again and it leaves bytes in flight, but no packet_lost
is logged and the congestion controller never hears of it (RFC 9002 §7.4: "Endpoints
MUST NOT ignore the loss of packets that were sent after the earliest acknowledged
packet in a given packet number space"). quic-go's PTO shortcut (F26) is one real
form of it.

aioquic declares losses in QuicPacketRecovery._on_packets_lost, outside the
controller; the constructor patches it (tests/mutants/_patch.py says why).
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl
from aioquic.quic.packet_builder import QuicDeliveryState

from ._patch import patch

_stock_lost = recovery.QuicPacketRecovery._on_packets_lost


def _lost(self, *, congestion_event: bool = True, now: float, packets, persistent_congestion: bool = False,
          space) -> None:
    reported, ignored = [], []
    for packet in packets:
        if congestion_event and space.is_application_data:
            self._mutant_losses = getattr(self, "_mutant_losses", 0) + 1
            (ignored if self._mutant_losses % 2 == 0 else reported).append(packet)
        else:
            reported.append(packet)
    for packet in ignored:
        del space.sent_packets[packet.packet_number]
        if packet.is_ack_eliciting:
            space.ack_eliciting_in_flight -= 1
        for handler, args in packet.delivery_handlers:
            handler(QuicDeliveryState.LOST, *args)
    in_flight = [p for p in ignored if p.in_flight]
    if in_flight:
        self._cc.on_packets_expired(packets=in_flight)  # out of flight, no congestion event
    if reported:
        _stock_lost(self, congestion_event=congestion_event, now=now, packets=reported,
                    persistent_congestion=persistent_congestion, space=space)


class IgnoresEverySecondLoss(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketRecovery, "_on_packets_lost", _lost)
