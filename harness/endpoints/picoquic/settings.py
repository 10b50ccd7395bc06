"""Reads the endpoint contract's environment (docs/endpoints.md) for the picoquic endpoint.

Everything the contract asks that aiopquic 0.6.1 cannot do is refused here, before
any socket exists, with one line that the harness shows as the skip reason.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

#: Exit status for "this option cannot be honoured" (docs/endpoints.md).
UNSUPPORTED = 127

#: picoquic's registry names (register_all_cc_algorithms); "reno" is its alias.
CC_NAMES = ("newreno", "cubic", "dcubic", "fast", "bbr", "bbr1", "prague", "c4")
CC_ALIASES = {"reno": "newreno"}
#: picoquic's library default; aiopquic's own default (bbr1) is not used.
DEFAULT_CC = "newreno"
TESTCASES = ("transfer", "multiplexing", "appidle")
#: picoquic's first-flight path MTU (PICOQUIC_INITIAL_MTU_IPV4 / _IPV6). With PMTUD
#: blocked it never sends larger, and aiopquic offers no way to set another size.
INITIAL_MTU = {4: 1252, 6: 1232}
#: aiopquic sizes each stream's receive ring from the window as a uint32 power of two.
MAX_FLOW_WINDOW = 1 << 31


class Unsupported(Exception):
    """An option this endpoint cannot honour; the message is the one stderr line."""


@dataclass(frozen=True)
class Request:
    host: str
    port: int
    name: str


@dataclass(frozen=True)
class Settings:
    role: str
    testcase: str
    cc: str
    flow_window: int
    max_datagram_size: int
    ip_version: int
    qlog_dir: str | None
    keylog_file: str | None
    applog: str | None
    timeout_s: float | None
    think_ms: float
    # server
    addr: str
    port: int
    www: str
    certs: str
    # client
    requests: tuple[Request, ...]
    downloads: str


def _int(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None


def parse_requests(raw: str) -> tuple[Request, ...]:
    """`https://ADDR:PORT/NAME ...` into requests; all must name one server."""
    out = []
    for url in raw.split():
        parts = urlsplit(url)
        name = parts.path.lstrip("/")
        if parts.hostname is None or not name:
            raise ValueError(f"REQUESTS entry {url!r} is not https://ADDR:PORT/NAME")
        out.append(Request(parts.hostname, parts.port or 443, name))
    if not out:
        raise ValueError("REQUESTS is empty")
    if len({(r.host, r.port) for r in out}) != 1:
        raise Unsupported("picoquic endpoint: REQUESTS must all name one server (one connection)")
    return tuple(out)


def _ip_version(host: str) -> int:
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return 4  # a name; aiopquic's connect() prefers its IPv4 address


def _cc(raw: str | None) -> str:
    if not raw:
        return DEFAULT_CC
    name = CC_ALIASES.get(raw, raw)
    if name not in CC_NAMES:
        raise Unsupported(
            f"picoquic endpoint: LL_CC={raw!r} unsupported; picoquic has {', '.join(CC_NAMES)}"
            + (" (no CC by import path)" if ":" in raw else ""))
    return name


def load(env: dict[str, str] | None = None) -> Settings:
    """The settings from `env` (default os.environ).

    Raises Unsupported for options aiopquic cannot honour and ValueError for
    malformed values.
    """
    env = dict(os.environ if env is None else env)
    role = env.get("ROLE", "")
    if role not in ("client", "server"):
        raise Unsupported(f"picoquic endpoint: ROLE={role!r} unsupported (client|server)")
    testcase = env.get("TESTCASE", "transfer")
    if testcase not in TESTCASES:
        raise Unsupported(f"picoquic endpoint: TESTCASE={testcase!r} unsupported")
    if env.get("LL_DIRECTION", "download") != "download":
        raise Unsupported(f"picoquic endpoint: LL_DIRECTION={env['LL_DIRECTION']!r} unsupported (downloads only)")
    if env.get("LL_INITIAL_WINDOW"):
        raise Unsupported(
            "picoquic endpoint: LL_INITIAL_WINDOW unsupported; picoquic's initial window is the "
            "compile-time PICOQUIC_CWIN_INITIAL and aiopquic exposes no setter")
    cc = _cc(env.get("LL_CC"))
    flow_window = _int(env, "LL_FLOW_WINDOW", 64 << 20)
    if not 0 < flow_window <= MAX_FLOW_WINDOW:
        raise Unsupported(
            f"picoquic endpoint: LL_FLOW_WINDOW={flow_window} outside 1..{MAX_FLOW_WINDOW} "
            "(aiopquic's per-stream ring size is a uint32 power of two)")

    requests: tuple[Request, ...] = ()
    if role == "client":
        requests = parse_requests(env.get("REQUESTS", ""))
        ip_version = _ip_version(requests[0].host)
    else:
        ip_version = _ip_version(env.get("LL_ADDR", "0.0.0.0"))
    mds = _int(env, "LL_MAX_DATAGRAM_SIZE", INITIAL_MTU[ip_version])
    if mds != INITIAL_MTU[ip_version]:
        raise Unsupported(
            f"picoquic endpoint: LL_MAX_DATAGRAM_SIZE={mds} unsupported; aiopquic cannot set "
            f"picoquic's MTU, only its IPv{ip_version} initial {INITIAL_MTU[ip_version]} "
            "(PMTUD blocked)")
    timeout = env.get("LL_TIMEOUT_S", "")
    return Settings(
        role=role,
        testcase=testcase,
        cc=cc,
        flow_window=flow_window,
        max_datagram_size=mds,
        ip_version=ip_version,
        qlog_dir=env.get("QLOGDIR") or None,
        keylog_file=env.get("SSLKEYLOGFILE") or None,
        applog=env.get("LL_APPLOG") or None,
        timeout_s=float(timeout) if timeout else None,
        think_ms=float(env.get("LL_THINK_MS") or 0),
        addr=env.get("LL_ADDR", "0.0.0.0"),
        port=_int(env, "LL_PORT", 4433),
        www=env.get("LL_WWW", "/www"),
        certs=env.get("LL_CERTS", "/certs"),
        requests=requests,
        downloads=env.get("LL_DOWNLOADS", "/downloads"),
    )
