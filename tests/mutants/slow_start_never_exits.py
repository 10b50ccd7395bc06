"""Mutant: every acknowledgement outside recovery grows the window by the bytes
acknowledged, whatever ssthresh says: slow start never ends, a loss only halves the
window before exponential growth resumes (RFC 9002 §7.3.1/§7.3.3: above ssthresh,
growth is at most one datagram per window acknowledged).

Source: a slow-start test written against the wrong variable (the bug class behind
the exponential post-loss ramps seen in QUIC comparisons by Yu & Benson, WWW'21).
"""

from aioquic.quic.congestion.reno import RenoCongestionControl


class SlowStartNeverExits(RenoCongestionControl):
    longlook_family = "newreno"

    def on_packet_acked(self, *, now, packet) -> None:
        self.bytes_in_flight -= packet.sent_bytes
        if packet.sent_time <= self._congestion_recovery_start_time:
            return
        self.congestion_window += packet.sent_bytes
