"""Mutant: CUBIC that undoes a cut whenever a packet it declared lost is acknowledged
after all, however late (RFC 9438 §4.9.2: "when the detection happens long after a
spurious loss event and the current cwnd is already higher than cwnd_prior, CUBIC
SHOULD continue to use the current and the most recent values"): it restores the
saved window even when the window has regrown past it, a fall with no congestion
event behind it.

aioquic forgets a packet once it declares it lost, so an acknowledgement of it is
ignored. The constructor patches its recovery class (tests/mutants/_patch.py says why
not at import) to remember the packet numbers it declared lost in each space and to
tell the controller when an ACK covers one; the controller keeps its state from before
each congestion event (the window, ssthresh, W_max, K, the epoch and W_est: RFC 9438
§4.9.2's list) and restores it then, unconditionally.
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.cubic import CubicCongestionControl

from ._patch import patch

_on_packets_lost = recovery.QuicPacketRecovery._on_packets_lost
_on_ack_received = recovery.QuicPacketRecovery.on_ack_received


def _remember_lost(self, *, congestion_event: bool = True, now: float, packets, persistent_congestion: bool = False,
                   space) -> None:
    packets = list(packets)
    if congestion_event:
        space.__dict__.setdefault("longlook_lost", set()).update(p.packet_number for p in packets)
    _on_packets_lost(self, congestion_event=congestion_event, now=now, packets=packets,
                     persistent_congestion=persistent_congestion, space=space)


def _spot_spurious(self, *, ack_rangeset, ack_delay: float, now: float, space) -> None:
    lost = space.__dict__.get("longlook_lost", set())
    found = {pn for pn in lost if any(pn in r for r in ack_rangeset)}
    if found:
        lost -= found
        undo = getattr(self._cc, "longlook_spurious", None)
        if undo is not None:
            undo(now=now)
    _on_ack_received(self, ack_rangeset=ack_rangeset, ack_delay=ack_delay, now=now, space=space)


#: aioquic CUBIC's state that a congestion event changes.
SAVED = ("congestion_window", "ssthresh", "_W_max", "K", "_t_epoch", "_cwnd_epoch", "_W_est",
         "_starting_congestion_avoidance")


class CubicLateUndo(CubicCongestionControl):
    longlook_family = "cubic"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery.QuicPacketRecovery, "_on_packets_lost", _remember_lost)
        patch(recovery.QuicPacketRecovery, "on_ack_received", _spot_spurious)
        self._saved = None  # SAVED's values before the latest congestion event

    def on_packets_lost(self, *, now: float, packets) -> None:
        before = tuple(getattr(self, name) for name in SAVED)
        started = self._congestion_recovery_start_time
        super().on_packets_lost(now=now, packets=packets)
        if self._congestion_recovery_start_time != started:  # a new congestion event
            self._saved = before

    def longlook_spurious(self, *, now: float) -> None:
        # The bug: no check that the window is still below the saved one.
        if self._saved is not None:
            for name, value in zip(SAVED, self._saved):
                setattr(self, name, value)
            self._saved = None
