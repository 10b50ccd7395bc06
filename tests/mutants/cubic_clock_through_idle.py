"""Mutant: CUBIC whose clock runs through application-limited pauses (RFC 9438 §4.2:
t "MUST NOT include periods during which cwnd has not been updated due to
application-limited behavior"), so after a pause its window jumps towards W_max.

aioquic's CUBIC measures t from the epoch by the wall clock, but restarts its whole
controller after K_CUBIC_MAX_IDLE_TIME without an ACK, which hides that after pauses
longer than 2 s (shorter ones show it: F110, whose signature covers those only); this
mutant only drops the restart, leaving the clock as it is, so the 4 s pause shows it too.
"""

from aioquic.quic.congestion.cubic import CubicCongestionControl


class CubicClockThroughIdle(CubicCongestionControl):
    longlook_family = "cubic"

    def on_packet_sent(self, *, packet) -> None:
        self.bytes_in_flight += packet.sent_bytes
