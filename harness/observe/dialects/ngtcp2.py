"""ngtcp2 (0.12.1, Debian's gtlsserver): JSON-SEQ qlog 0.3 as ngtcp2 writes it.

Standard names and units (RTTs in ms), with two differences: event times are whole
milliseconds, and `common_fields.reference_time` is 0 with "relative" times, which
names no clock, so times are placed by the endpoint's first datagram on the link
(clock "link"). No congestion states are logged (left to harness/observe/states.py).
"""

from __future__ import annotations

from harness.observe.dialects._base import DRAFT_CAPABILITIES, Dialect


class Ngtcp2Dialect(Dialect):
    """ngtcp2's qlog: whole-ms times, no reference clock, no congestion states."""

    stack = "ngtcp2"
    LOGS = DRAFT_CAPABILITIES - {"congestion_state"}
    # ngtcp2 logs the losses an ACK revealed before the packet that carried it, and
    # the window after: packet_lost ×n, packet_received (ACK), metrics_updated.
    losses_before_acks = True
    # Its metrics carry ssthresh from the moment it is set (a cut, or HyStart++'s exit).
    unset_ssthresh_is_infinite = True
    FACTS = (
        "ngtcp2: no congestion states logged (left to harness/observe/states.py)",
        "ngtcp2: event times in whole milliseconds; reference_time 0 names no clock",
    )
