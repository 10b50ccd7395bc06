"""Mutant: a recovery period that never ends. The window is cut on the first loss
and never grows again, because every acknowledged packet counts as sent inside the
period (RFC 9002 §7.3.2: "A recovery period ends and the sender enters congestion
avoidance when a packet sent during the recovery period is acknowledged").

A sender stuck so cuts correctly once and never twice in a period: the rules about
cuts alone do not see it. On aioquic's NewReno: the period's
start moves to the end of time when it begins.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl


class StuckInRecovery(RenoCongestionControl):
    longlook_family = "newreno"

    def on_packets_lost(self, *, now: float, packets) -> None:
        started = self._congestion_recovery_start_time
        super().on_packets_lost(now=now, packets=packets)
        if self._congestion_recovery_start_time != started:
            self._congestion_recovery_start_time = float("inf")
