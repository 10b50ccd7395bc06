"""Mutant: the server counts every byte it receives twice towards its
anti-amplification budget, so before the client's address is validated it sends up
to six times what it received, not three (RFC 9000 §8.1; RFC 9002 §6.2.2.1: a server
at its limit arms no PTO, so it sends nothing more).

aioquic keeps the budget on QuicNetworkPath (bytes_received, only ever set to 0 and
increased with +=), outside the controller; the constructor patches it (see
tests/mutants/_patch.py) with a property whose reads double what was added.
"""

from aioquic.quic import connection
from aioquic.quic.congestion.reno import RenoCongestionControl

from ._patch import patch


def _get(self) -> int:
    return 2 * self.__dict__.get("_mutant_received", 0)


def _set(self, value: int) -> None:
    # `path.bytes_received += n` sets 2·r + n: keep r + n.
    self.__dict__["_mutant_received"] = value - self.__dict__.get("_mutant_received", 0)


class AmplificationTwice(RenoCongestionControl):
    longlook_family = "newreno"

    def __init__(self, *, max_datagram_size: int) -> None:
        super().__init__(max_datagram_size=max_datagram_size)
        patch(connection.QuicNetworkPath, "bytes_received", property(_get, _set))
