"""longlook endpoint for kernel TCP + TLS 1.3: the baseline and the competing traffic.

Implements docs/endpoints.md over TCP: one TLS connection per request carrying the
request line `GET /NAME\r\n`; the server answers with the file's bytes and a TLS
close_notify. `multiplexing` opens the connections in parallel, which is how the
suite makes N competing TCP flows. Congestion control is chosen per socket
(TCP_CONGESTION). Standalone (standard library only), blocking sockets in threads:
simpler and faster than asyncio for bulk TLS.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import ssl
import struct
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

STACK = "tcp"
SERVER_NAME = "server.longlook.test"  # SNI only; clients do not verify
TESTCASES = ("transfer", "multiplexing", "appidle")
CC_ALIASES = {"newreno": "reno"}
# Linux's initial window is 10 segments and per route only (ip route initcwnd),
# never per socket; only a request for that same value can be honoured.
FIXED_INITIAL_WINDOW = 10
SIOCOUTQ = 0x5411  # bytes not yet acknowledged by the peer (unsent + unacked)
DRAIN_POLL_S = 0.001


class Unsupported(Exception):
    """An option this endpoint cannot honour: exit 127 with one stderr line."""


def now_us() -> int:
    return time.monotonic_ns() // 1000


class AppLog:
    """LL_APPLOG writer shared by threads: NDJSON, one line per event, flushed at once."""

    def __init__(self, path: str | None):
        self._fp = open(path, "a", buffering=1) if path else None
        self._lock = threading.Lock()

    def write(self, record: dict) -> None:
        if self._fp:
            with self._lock:
                self._fp.write(json.dumps(record) + "\n")

    def event(self, event: str, **fields) -> None:
        self.write({"t_us": now_us(), "event": event, **fields})


def kernel_cc(spec: str) -> str:
    """The kernel's name for LL_CC, checked on a probe socket (the only sure test)."""
    if ":" in spec:
        raise Unsupported(f"LL_CC={spec}: a CC class by import path needs a QUIC stack in Python")
    name = CC_ALIASES.get(spec, spec)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
        except OSError as err:
            raise Unsupported(f"LL_CC={spec} unsupported by this kernel ({err.strerror}; "
                              "see net.ipv4.tcp_available_congestion_control)") from None
    return name


class Settings:
    """The contract's environment, validated before any connection is made."""

    def __init__(self, env: dict[str, str]):
        self.role = env.get("ROLE", "")
        if self.role not in ("client", "server"):
            raise Unsupported(f"ROLE={self.role!r} unknown (client or server)")
        self.testcase = env.get("TESTCASE", "transfer")
        if self.testcase not in TESTCASES:
            raise Unsupported(f"TESTCASE={self.testcase} unsupported ({', '.join(TESTCASES)})")
        if env.get("LL_DIRECTION", "download") != "download":
            raise Unsupported(f"LL_DIRECTION={env['LL_DIRECTION']} unsupported (downloads only)")
        self.cc_spec = env.get("LL_CC", "cubic")
        self.cc = kernel_cc(self.cc_spec)
        iw = env.get("LL_INITIAL_WINDOW")
        if iw and int(iw) != FIXED_INITIAL_WINDOW:
            raise Unsupported(f"LL_INITIAL_WINDOW={iw} unsupported (Linux sets the initial "
                              f"window per route, not per socket; it is {FIXED_INITIAL_WINDOW})")
        mds = env.get("LL_MAX_DATAGRAM_SIZE")
        self.mss = int(mds) if mds else None
        if self.mss is not None and not 536 <= self.mss <= 65495:
            raise Unsupported(f"LL_MAX_DATAGRAM_SIZE={mds} is no valid TCP MSS")
        self.think_s = float(env.get("LL_THINK_MS", "1000")) / 1000
        timeout = env.get("LL_TIMEOUT_S")
        self.timeout_s = float(timeout) if timeout else None
        self.qlogdir = env.get("QLOGDIR")
        self.keylog = env.get("SSLKEYLOGFILE")
        self.applog = env.get("LL_APPLOG")
        self.requests = env.get("REQUESTS", "").split()
        self.addr = env.get("LL_ADDR", "0.0.0.0")
        self.port = int(env.get("LL_PORT", "4433"))
        self.www = Path(env.get("LL_WWW", "/www"))
        self.downloads = Path(env.get("LL_DOWNLOADS", "/downloads"))
        self.certs = Path(env.get("LL_CERTS", "/certs"))


def tune(sock: socket.socket, s: Settings) -> None:
    """Per-socket CC and MSS; buffers stay autotuned (see README)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, s.cc.encode())
    if s.mss is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, s.mss)


def tls_context(s: Settings, server: bool) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    # CPython 3.10 to 3.11.2 set this by default (Debian 12's python3.11 does): a
    # peer's missing close_notify then reads as a clean EOF and a truncated response
    # as a complete one. The client relies on that EOF raising, whatever the build.
    ctx.options &= ~ssl.OP_IGNORE_UNEXPECTED_EOF
    if s.keylog:
        ctx.keylog_filename = s.keylog
    if server:
        ctx.load_cert_chain(s.certs / "cert.pem", s.certs / "priv.key")
        ctx.num_tickets = 0  # no post-handshake tickets: the response is the only data
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


# --- server -----------------------------------------------------------------------

def serve_one(raw: socket.socket, index: int, s: Settings, ctx: ssl.SSLContext,
              applog: AppLog) -> None:
    """Answers one connection (in its own thread, so handshakes do not queue)."""
    www = s.www.resolve()
    cport = raw.getpeername()[1]
    conn = raw
    try:
        conn = ctx.wrap_socket(raw, server_side=True)
        # Set again on the accepted socket: inheritance from the listener is a
        # kernel detail, and the sender's CC is what matters.
        tune(conn, s)
        request = b""
        while not request.endswith(b"\n") and len(request) < 4096:
            chunk = conn.recv(4096)
            if not chunk:
                break
            request += chunk
        parts = request.decode("ascii", "replace").split()
        path = (www / parts[1].lstrip("/")).resolve() if len(parts) >= 2 else None
        if path is None or parts[0] != "GET" or www not in path.parents or not path.is_file():
            # Closing without close_notify makes the client fail the request.
            print(f"tcp server: bad request {request!r}", file=sys.stderr)
            return
        data = path.read_bytes()
        # The CC read back from the socket: proof of what this flow really ran.
        cc = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
        applog.event("request_start", stream=index, bytes=len(data), cport=cport,
                     cc=cc.split(b"\0", 1)[0].decode())
        conn.sendall(data)
        # request_done when the peer has acknowledged every byte (the kernel's send
        # queue is empty), the same moment a QUIC server's stream is fully acked.
        outq = struct.pack("i", 0)
        while struct.unpack("i", fcntl.ioctl(conn.fileno(), SIOCOUTQ, outq))[0] > 0:
            time.sleep(DRAIN_POLL_S)
        applog.event("request_done", stream=index, bytes=len(data), cport=cport)
        conn.unwrap().close()
    except (OSError, ValueError) as err:
        print(f"tcp server: connection {index}: {type(err).__name__}: {err}", file=sys.stderr)
    finally:
        conn.close()


def run_server(s: Settings, applog: AppLog) -> None:
    ctx = tls_context(s, server=True)
    listener = socket.socket(socket.AF_INET6 if ":" in s.addr else socket.AF_INET,
                             socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tune(listener, s)
    listener.bind((s.addr, s.port))
    listener.listen(128)
    print(json.dumps({"ready": True}), flush=True)
    index = 0
    while True:
        raw, _ = listener.accept()
        raw.settimeout(s.timeout_s)
        threading.Thread(target=serve_one, args=(raw, index, s, ctx, applog),
                         daemon=True).start()
        index += 1


# --- client -----------------------------------------------------------------------

def fetch(index: int, url, s: Settings, ctx: ssl.SSLContext, applog: AppLog,
          deadline: float | None) -> None:
    """One request on its own TLS connection; raises on any failure."""
    name = url.path.lstrip("/")
    target = s.downloads / name
    target.parent.mkdir(parents=True, exist_ok=True)
    family, _, _, _, addr = socket.getaddrinfo(url.hostname, url.port or 443,
                                               type=socket.SOCK_STREAM)[0]
    raw = socket.socket(family, socket.SOCK_STREAM)
    tune(raw, s)
    raw.settimeout(None if deadline is None else max(0.001, deadline - time.monotonic()))
    raw.connect(addr)
    cport = raw.getsockname()[1]
    # A missing close_notify is a truncated response, so ragged EOFs must raise.
    with ctx.wrap_socket(raw, server_hostname=SERVER_NAME, suppress_ragged_eofs=False) as conn:
        applog.event("request_start", stream=index, bytes=0, cport=cport)
        conn.sendall(f"GET /{name}\r\n".encode())
        size = 0
        buf = bytearray(256 * 1024)
        with open(target, "wb") as fp:
            while n := conn.recv_into(buf):
                fp.write(buf[:n])
                size += n
        applog.event("request_done", stream=index, bytes=size, cport=cport)
        try:
            conn.unwrap()
        except OSError:
            pass  # the server may already be gone; the response is complete


def run_client(s: Settings, applog: AppLog) -> int:
    urls = [urlsplit(u) for u in s.requests]
    if not urls:
        raise ValueError("REQUESTS is empty")
    ctx = tls_context(s, server=False)
    deadline = None if s.timeout_s is None else time.monotonic() + s.timeout_s
    if s.testcase != "multiplexing":
        for i, url in enumerate(urls):
            if i and s.testcase == "appidle":
                applog.event("idle_start")
                time.sleep(s.think_s)
                applog.event("idle_end")
            fetch(i, url, s, ctx, applog, deadline)
        return 0
    errors: list[BaseException] = []

    def worker(i, url):
        try:
            fetch(i, url, s, ctx, applog, deadline)
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i, u), daemon=True)
               for i, u in enumerate(urls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        raise TimeoutError("requests still running")
    if errors:
        raise errors[0]
    return 0


# --- main -------------------------------------------------------------------------

def main() -> int:
    try:
        s = Settings(dict(os.environ))
    except Unsupported as err:
        print(f"{STACK}: {err}", file=sys.stderr)
        return 127
    if s.qlogdir:
        os.makedirs(s.qlogdir, exist_ok=True)  # the kernel writes no qlog
    applog = AppLog(s.applog)
    applog.write({"event": "version", "stack": STACK, "version": os.uname().release,
                  "cc": s.cc_spec if s.cc_spec in CC_ALIASES else s.cc, "kernel_cc": s.cc,
                  "tls": ssl.OPENSSL_VERSION, "t_us": now_us()})
    if s.role == "server":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        if s.timeout_s:
            signal.signal(signal.SIGALRM, lambda *_: sys.exit(1))
            signal.setitimer(signal.ITIMER_REAL, s.timeout_s)
        try:
            run_server(s, applog)
        except KeyboardInterrupt:
            return 0
        return 0
    try:
        return run_client(s, applog)
    except (OSError, ValueError) as err:
        print(f"{STACK} client: {type(err).__name__}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
