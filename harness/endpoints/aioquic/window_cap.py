"""A ceiling on aioquic's congestion window: the contract's LL_MAX_WINDOW (bytes).

Kakhki et al. (IMC'17) found Google QUIC's maximum congestion window of 107 packets
capping its throughput wherever the path's bandwidth-delay product exceeds it;
`longlook reproduce kakhki-window-cap` puts a cap on today's stacks to show the same.
aioquic has no setting for it. Every controller of aioquic writes its window to the
`congestion_window` attribute, so a subclass that makes that attribute a property
clamping what is written caps every path to it (growth, undo, recovery) at once.
Standalone (imports only aioquic): the real endpoint imports it beside endpoint.py,
virtual time (harness/virtual) as a module of this package.
"""

from __future__ import annotations

#: The least cap accepted: RFC 9002's minimum window, two datagrams of 1200 bytes.
MIN_CAP = 2 * 1200


def capped_class(base: type, cap_bytes: int) -> type:
    """`base` with its congestion window never above `cap_bytes`."""

    class Capped(base):
        @property
        def congestion_window(self) -> int:
            return self.__dict__["_longlook_cwnd"]

        @congestion_window.setter
        def congestion_window(self, value) -> None:
            self.__dict__["_longlook_cwnd"] = min(int(value), cap_bytes)

    Capped.__name__ = Capped.__qualname__ = f"{base.__name__}CappedAt{cap_bytes}"
    return Capped


def register_capped(native: str, cap_bytes: int) -> str:
    """Registers aioquic's controller `native` capped at `cap_bytes` and returns the
    name it is registered under. ValueError below MIN_CAP."""
    from aioquic.quic.congestion import base

    if cap_bytes < MIN_CAP:
        raise ValueError(f"a window cap of {cap_bytes} B is below two datagrams ({MIN_CAP} B)")
    name = f"{native}+cap{cap_bytes}"
    classes: dict[type, type] = {}

    def factory(*, max_datagram_size: int):
        plain = type(base.create_congestion_control(native, max_datagram_size=max_datagram_size))
        cls = classes.setdefault(plain, capped_class(plain, cap_bytes))
        return cls(max_datagram_size=max_datagram_size)

    base.register_congestion_control(name, factory)
    return name
