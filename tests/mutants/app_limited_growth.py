"""Mutant: the window grows on every acknowledgement while the sender is
application-limited (RFC 9002 §7.8 says it should not grow then).

Source: the design notes' list of seed bugs (a window inflated while idle turns
into a burst when the application wakes). aioquic 1.7.2 has no notion of being
application-limited at all, so on aioquic this mutant is the stock controller: it
is equivalent there by construction, and the zoo shows the same property killing
it on quinn (mutant-app-limited-growth), which does check.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl


class AppLimitedGrowth(RenoCongestionControl):
    """Stock NewReno: its on_packet_acked already grows whatever the flight."""

    longlook_family = "newreno"
