"""Mutant: the probe timeout has no kGranularity floor, smoothed_rtt + 4 × rttvar
alone (RFC 9002 §6.2.1: "The PTO period MUST be at least kGranularity"). On a link of
a few hundred µs round trip a client with one RTT sample probes in under a
millisecond.

aioquic's recovery module reads kGranularity as a module constant in its PTO (and in
its time threshold's floor, which this property's schedules never reach); the
constructor patches it (tests/mutants/_patch.py says why not at import). Both ends of
a virtual-time run share the module, so the client carries the bug as well.
"""

from aioquic.quic import recovery
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch


class PtoWithoutGranularity(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(recovery, "K_GRANULARITY", 0.0)
