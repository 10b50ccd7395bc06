"""longlook endpoint for aioquic: HTTP/0.9 over QUIC (ALPN hq-interop), client or server.

Implements docs/endpoints.md with aioquic's asyncio API. Started by `run` with the
contract's environment and no arguments. Standalone on purpose (imports nothing
from harness/), so it runs in any interpreter that has aioquic installed.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import socket
import ssl
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

STACK = "aioquic"
PINNED_VERSION = "1.7.2"
ALPN = ["hq-interop"]
# A client also offers HTTP/3 (h3fetch.py), second, for servers that speak nothing
# else (caddy); a server that speaks both picks hq-interop.
CLIENT_ALPN = ["hq-interop", "h3"]
# A server also offers HTTP/3 (h3serve.py), for peers that speak nothing else (browsers).
SERVER_ALPN = ["hq-interop", "h3"]
# Clients do not verify the certificate; the name only fills SNI, because an IP
# literal is not a valid SNI value and some servers reject it.
SERVER_NAME = "server.longlook.test"
TESTCASES = ("transfer", "multiplexing", "appidle")
NATIVE_CC = {"newreno": "reno", "reno": "reno", "cubic": "cubic"}
# aioquic hard-codes K_INITIAL_WINDOW = 10 packets (congestion/base.py) and has no
# configuration for it; only a request for that same value can be honoured.
FIXED_INITIAL_WINDOW = 10
# Kernel socket drops would pose as network loss; ask for room well above the
# link buffers a property uses (SO_*BUFFORCE needs root, else capped by rmem_max).
UDP_SOCKET_BUFFER = 8 * 1024 * 1024


class Unsupported(Exception):
    """An option this endpoint cannot honour: exit 127 with one stderr line."""


def now_us() -> int:
    return time.monotonic_ns() // 1000


class AppLog:
    """LL_APPLOG writer: NDJSON, one line per event, flushed at once."""

    def __init__(self, path: str | None):
        self._fp = open(path, "a", buffering=1) if path else None

    def event(self, event: str, **fields) -> None:
        if self._fp:
            self._fp.write(json.dumps({"t_us": now_us(), "event": event, **fields}) + "\n")

    def version(self, version: str, cc: str, native_cc: str) -> None:
        # wall_us lets a reader align aioquic's qlog (wall-clock ms) with t_us.
        if self._fp:
            record = {"event": "version", "stack": STACK, "version": version, "cc": cc,
                      "native_cc": native_cc, "t_us": now_us(), "wall_us": time.time_ns() // 1000}
            self._fp.write(json.dumps(record) + "\n")

    def close(self) -> None:
        if self._fp:
            self._fp.close()


def qlog_writer_class():
    """A QuicLogger writing one JSON file per connection, flushable on SIGTERM.

    aioquic's QuicFileLogger writes a trace only when its connection ends, so a
    server killed mid-connection would leave no qlog; this one can flush the rest.
    """
    from aioquic.quic.logger import QLOG_VERSION, QuicLogger, QuicLoggerTrace

    class QlogDir(QuicLogger):
        def __init__(self, path: str):
            super().__init__()
            self.path = path

        def end_trace(self, trace: QuicLoggerTrace) -> None:
            if trace not in self._traces:
                return
            self._traces.remove(trace)
            data = trace.to_dict()
            name = os.path.join(self.path, data["common_fields"]["ODCID"] + ".qlog")
            with open(name, "w") as fp:
                json.dump({"qlog_format": "JSON", "qlog_version": QLOG_VERSION,
                           "traces": [data]}, fp)

        def flush(self) -> None:
            for trace in list(self._traces):
                self.end_trace(trace)

    return QlogDir


def select_cc(spec: str) -> tuple[str, str]:
    """Returns (name for the version record, name registered in aioquic)."""
    if ":" in spec:
        # A CC class by import path; import errors are real failures (exit 1),
        # not unsupported options, so that a broken mutant never becomes a skip.
        from aioquic.quic.congestion.base import register_congestion_control

        module_name, attr = spec.split(":", 1)
        factory = getattr(importlib.import_module(module_name), attr)
        native = f"longlook:{spec}"
        register_congestion_control(native, factory)
        return spec, native
    if spec not in NATIVE_CC:
        raise Unsupported(f"LL_CC={spec} unsupported (aioquic {PINNED_VERSION} has "
                          "newreno, cubic, or module:Factory)")
    return ("newreno" if spec == "reno" else spec), NATIVE_CC[spec]


class Settings:
    """The contract's environment, validated before any socket is opened."""

    def __init__(self, env: dict[str, str]):
        self.role = env.get("ROLE", "")
        if self.role not in ("client", "server"):
            raise Unsupported(f"ROLE={self.role!r} unknown (client or server)")
        self.testcase = env.get("TESTCASE", "transfer")
        if self.testcase not in TESTCASES:
            raise Unsupported(f"TESTCASE={self.testcase} unsupported ({', '.join(TESTCASES)})")
        self.upload = env.get("LL_DIRECTION", "download") == "upload"
        if env.get("LL_DIRECTION", "download") not in ("download", "upload"):
            raise Unsupported(f"LL_DIRECTION={env['LL_DIRECTION']} unsupported (download or upload)")
        self.cc_spec = env.get("LL_CC", "newreno")
        iw = env.get("LL_INITIAL_WINDOW")
        if iw and int(iw) != FIXED_INITIAL_WINDOW:
            raise Unsupported(f"LL_INITIAL_WINDOW={iw} unsupported (aioquic's initial "
                              f"window is fixed at {FIXED_INITIAL_WINDOW} packets)")
        cap = env.get("LL_MAX_WINDOW")
        self.max_window = int(cap) if cap else None
        hold = env.get("LL_ACK_HOLD_MS", "0")
        if not hold.isdigit() or int(hold) > 1000:
            raise Unsupported(f"LL_ACK_HOLD_MS={hold} unsupported (whole ms, 0 to 1000)")
        #: The receiver of the transfer holds its ACKs (ack_hold.py); the sender does not.
        receives = (self.role == "client") != self.upload
        self.ack_hold_ms = int(hold) if receives else 0
        self.max_datagram_size = int(env.get("LL_MAX_DATAGRAM_SIZE", "1252"))
        if self.max_datagram_size < 1200:
            raise Unsupported(f"LL_MAX_DATAGRAM_SIZE={self.max_datagram_size} unsupported "
                              "(aioquic requires >= 1200)")
        self.flow_window = int(env.get("LL_FLOW_WINDOW", str(64 * 1024 * 1024)))
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


def make_configuration(s: Settings, native_cc: str, is_client: bool):
    from aioquic.quic.configuration import QuicConfiguration

    config = QuicConfiguration(
        is_client=is_client,
        alpn_protocols=CLIENT_ALPN if is_client else SERVER_ALPN,
        congestion_control_algorithm=native_cc,
        max_data=s.flow_window,
        max_stream_data=s.flow_window,
        max_datagram_size=s.max_datagram_size,
    )
    if s.qlogdir:
        os.makedirs(s.qlogdir, exist_ok=True)
        config.quic_logger = qlog_writer_class()(s.qlogdir)
    if s.keylog:
        config.secrets_log_file = open(s.keylog, "a")
    if is_client:
        config.verify_mode = ssl.CERT_NONE
        config.server_name = SERVER_NAME
    else:
        config.load_cert_chain(s.certs / "cert.pem", s.certs / "priv.key")
    return config


def enlarge_buffers(sock: socket.socket) -> None:
    for force, plain in ((getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF),
                         (getattr(socket, "SO_SNDBUFFORCE", None), socket.SO_SNDBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force or plain, UDP_SOCKET_BUFFER)
        except (OSError, TypeError):
            sock.setsockopt(socket.SOL_SOCKET, plain, UDP_SOCKET_BUFFER)


# --- server -----------------------------------------------------------------------

def server_protocol_class(s: Settings, applog: AppLog):
    from aioquic.asyncio import QuicConnectionProtocol
    from aioquic.quic.events import ProtocolNegotiated, StreamDataReceived

    www = s.www.resolve()

    class ServerProtocol(QuicConnectionProtocol):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if s.ack_hold_ms:
                from ack_hold import hold_acks  # beside this file

                hold_acks(self._quic, s.ack_hold_ms)
            self._requests: dict[int, bytes] = {}
            self._sending: dict[int, tuple[object, int]] = {}
            # Uploads: stream → [open file, bytes stored].
            self._storing: dict[int, list] = {}
            self._h3 = None

        def quic_event_received(self, event) -> None:
            if isinstance(event, ProtocolNegotiated) and event.alpn_protocol == "h3":
                from h3serve import H3Server

                self._h3 = H3Server(self._quic, s.www, s.downloads, applog, self._watch)
            if self._h3 is not None:
                self._h3.handle(event)
                return
            if s.upload:
                if isinstance(event, StreamDataReceived):
                    self._store(event)
                return
            if isinstance(event, StreamDataReceived) and event.stream_id not in self._sending:
                buf = self._requests.get(event.stream_id, b"") + event.data
                self._requests[event.stream_id] = buf
                if event.end_stream or buf.endswith(b"\n"):
                    self._answer(event.stream_id, self._requests.pop(event.stream_id))

        def _answer(self, stream_id: int, request: bytes) -> None:
            parts = request.decode("ascii", "replace").split()
            path = (www / parts[1].lstrip("/")).resolve() if len(parts) >= 2 else None
            if (path is None or parts[0] != "GET" or www not in path.parents
                    or not path.is_file()):
                print(f"aioquic server: bad request {request!r}", file=sys.stderr)
                self._quic.reset_stream(stream_id, 1)
                return
            data = path.read_bytes()
            applog.event("request_start", stream=stream_id, bytes=len(data))
            self._quic.send_stream_data(stream_id, data, end_stream=True)
            self._watch(stream_id, len(data))

        def _watch(self, stream_id: int, size: int) -> None:
            # Private but pinned (1.7.2): the stream object tells when every byte
            # and the FIN are acknowledged, which is when the server's data is gone.
            self._sending[stream_id] = (self._quic._streams[stream_id], size)

        def _store(self, event) -> None:
            """An upload: the PUT line opens LL_DOWNLOADS/NAME, the rest of the stream
            is its body, and at the FIN the server answers with FIN alone."""
            sid, data = event.stream_id, event.data
            if sid not in self._storing:
                buf = self._requests.get(sid, b"") + data
                if b"\n" not in buf and not event.end_stream:
                    self._requests[sid] = buf
                    return
                self._requests.pop(sid, None)
                line, _, data = buf.partition(b"\n")
                parts = line.decode("ascii", "replace").split()
                name = parts[1].lstrip("/") if len(parts) >= 2 and parts[0] == "PUT" else ""
                if not name or "/" in name or name in (".", ".."):
                    print(f"aioquic server: bad upload {line!r}", file=sys.stderr)
                    self._quic.reset_stream(sid, 1)
                    return
                s.downloads.mkdir(parents=True, exist_ok=True)
                self._storing[sid] = [open(s.downloads / name, "wb"), 0]
                applog.event("request_start", stream=sid, bytes=0)
            store = self._storing[sid]
            store[0].write(data)
            store[1] += len(data)
            if event.end_stream:
                store[0].close()
                applog.event("request_done", stream=sid, bytes=store[1])
                self._quic.send_stream_data(sid, b"", end_stream=True)

        def datagram_received(self, data, addr) -> None:
            super().datagram_received(data, addr)
            for stream_id, (stream, size) in list(self._sending.items()):
                if stream.sender.is_finished:
                    del self._sending[stream_id]
                    applog.event("request_done", stream=stream_id, bytes=size)
            if self._closed.is_set():
                # Closed with data never acknowledged: say so rather than stay silent.
                for stream_id, (_, size) in self._sending.items():
                    applog.event("request_done", stream=stream_id, bytes=size, acked=False)
                self._sending.clear()

    return ServerProtocol


async def run_server(s: Settings, applog: AppLog, config) -> None:
    from aioquic.asyncio import serve

    server = await serve(s.addr, s.port, configuration=config,
                         create_protocol=server_protocol_class(s, applog))
    enlarge_buffers(server._transport.get_extra_info("socket"))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(json.dumps({"ready": True}), flush=True)
    await stop.wait()


# --- client -----------------------------------------------------------------------

def client_protocol_class():
    from aioquic.asyncio import QuicConnectionProtocol
    from aioquic.quic.events import ConnectionTerminated, ProtocolNegotiated, StreamDataReceived, StreamReset

    class ClientProtocol(QuicConnectionProtocol):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._pending: dict[int, tuple[asyncio.Future, object, list[int]]] = {}
            self.h3 = None
            #: The :authority of h3 requests (set before connecting).
            self.authority = ""

        async def fetch(self, name: str, target: Path, applog: AppLog) -> None:
            """Requests /name on a new stream and writes the response to target."""
            if self.h3 is not None:
                stream_id, done = self.h3.get(name, target)
                applog.event("request_start", stream=stream_id, bytes=0)
                self.transmit()
                size = await done
                applog.event("request_done", stream=stream_id, bytes=size)
                return
            stream_id = self._quic.get_next_available_stream_id()
            target.parent.mkdir(parents=True, exist_ok=True)
            done = self._loop.create_future()
            self._pending[stream_id] = (done, open(target, "wb"), [0])
            applog.event("request_start", stream=stream_id, bytes=0)
            self._quic.send_stream_data(stream_id, f"GET /{name}\r\n".encode(), end_stream=True)
            self.transmit()
            size = await done
            applog.event("request_done", stream=stream_id, bytes=size)

        async def upload(self, name: str, source: Path, applog: AppLog) -> None:
            """Sends PUT /name and the bytes of source on a new stream; done when the
            server's FIN says it has them all."""
            stream_id = self._quic.get_next_available_stream_id()
            body = source.read_bytes()
            done = self._loop.create_future()
            self._pending[stream_id] = (done, None, [0])
            applog.event("request_start", stream=stream_id, bytes=len(body))
            self._quic.send_stream_data(stream_id, f"PUT /{name}\r\n".encode() + body, end_stream=True)
            self.transmit()
            await done
            applog.event("request_done", stream=stream_id, bytes=len(body))

        def quic_event_received(self, event) -> None:
            if isinstance(event, ProtocolNegotiated) and event.alpn_protocol == "h3":
                # From the first event on: the server's control and QPACK streams
                # follow the handshake at once, and HTTP/3 must see them.
                from h3fetch import H3Client

                self.h3 = H3Client(self._quic, self.authority, self._loop)
            if self.h3 is not None:
                self.h3.handle(event)
                if isinstance(event, ConnectionTerminated):
                    self.h3.fail_all(f"connection closed: {event.reason_phrase}")
                return
            if isinstance(event, StreamDataReceived) and event.stream_id in self._pending:
                done, fp, count = self._pending[event.stream_id]
                if fp is not None:
                    fp.write(event.data)
                count[0] += len(event.data)
                if event.end_stream:
                    if fp is not None:
                        fp.close()
                    del self._pending[event.stream_id]
                    done.set_result(count[0])
            elif isinstance(event, StreamReset) and event.stream_id in self._pending:
                done, fp, _ = self._pending.pop(event.stream_id)
                if fp is not None:
                    fp.close()
                done.set_exception(ConnectionError(f"stream {event.stream_id} reset "
                                                   f"by the server ({event.error_code})"))
            elif isinstance(event, ConnectionTerminated):
                for done, fp, _ in self._pending.values():
                    if fp is not None:
                        fp.close()
                    done.set_exception(ConnectionError(f"connection closed: {event.reason_phrase}"))
                self._pending.clear()

    return ClientProtocol


async def run_client(s: Settings, applog: AppLog, config) -> None:
    from aioquic.quic.connection import QuicConnection

    urls = [urlsplit(u) for u in s.requests]
    if not urls:
        raise ValueError("REQUESTS is empty")
    host, port = urls[0].hostname, urls[0].port or 443
    names = [u.path.lstrip("/") for u in urls]
    loop = asyncio.get_running_loop()
    family, _, _, _, addr = (await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM))[0]
    # Our own socket (not aioquic's connect()), because that one is an AF_INET6
    # dual-stack socket and the test namespaces run with IPv6 disabled.
    sock = socket.socket(family, socket.SOCK_DGRAM)
    enlarge_buffers(sock)
    sock.bind(("0.0.0.0", 0) if family == socket.AF_INET else ("::", 0))

    def connection() -> QuicConnection:
        conn = QuicConnection(configuration=config)
        if s.ack_hold_ms:
            from ack_hold import hold_acks  # beside this file

            hold_acks(conn, s.ack_hold_ms)
        return conn

    transport, proto = await loop.create_datagram_endpoint(
        lambda: client_protocol_class()(connection()), sock=sock)
    try:
        proto.authority = urls[0].netloc
        proto.connect(addr)
        await proto.wait_connected()
        if proto.h3 is not None and s.upload:
            raise Unsupported("uploads speak hq-interop; this server speaks only h3")

        def one(name: str):
            """The request for `name`: a download to LL_DOWNLOADS, or an upload from LL_WWW."""
            if s.upload:
                return proto.upload(name, s.www / name, applog)
            return proto.fetch(name, s.downloads / name, applog)

        if s.testcase == "multiplexing":
            await asyncio.gather(*(one(n) for n in names))
        else:
            for i, name in enumerate(names):
                if i and s.testcase == "appidle":
                    applog.event("idle_start")
                    await asyncio.sleep(s.think_s)
                    applog.event("idle_end")
                await one(name)
        # A PING whose ACK comes back proves the server saw our ACK of its last
        # bytes (aioquic would otherwise close with that ACK still delayed), so the
        # server's request_done marks real delivery.
        # Every response is complete by now, so a lost PING is no failure.
        try:
            await asyncio.wait_for(proto.ping(), 5.0)
        except (asyncio.TimeoutError, ConnectionError):
            print(f"{STACK} client: final PING unanswered", file=sys.stderr)
    finally:
        proto.close()
        try:
            await asyncio.wait_for(proto.wait_closed(), 2.0)
        except asyncio.TimeoutError:
            pass
        transport.close()


# --- main -------------------------------------------------------------------------

def main() -> int:
    try:
        s = Settings(dict(os.environ))
        _, native_cc = cc_name = select_cc(s.cc_spec)
        if s.max_window:
            from window_cap import register_capped  # beside this file

            try:
                native_cc = register_capped(native_cc, s.max_window)
            except ValueError as err:
                raise Unsupported(f"LL_MAX_WINDOW={s.max_window} unsupported: {err}") from None
    except Unsupported as err:
        print(f"{STACK}: {err}", file=sys.stderr)
        return 127
    import aioquic

    applog = AppLog(s.applog)
    applog.version(aioquic.__version__, cc_name[0], native_cc)
    config = make_configuration(s, native_cc, is_client=s.role == "client")
    if s.ack_hold_ms:
        # A release without the ACK timer ack_hold.py sets cannot hold: say so (127)
        # before the run, rather than fail it (a sweep of releases meets such ones).
        from aioquic.quic.connection import QuicConnection

        from ack_hold import hold_acks  # beside this file

        try:
            hold_acks(QuicConnection(configuration=make_configuration(s, native_cc, is_client=True)), s.ack_hold_ms)
        except ValueError as err:
            print(f"{STACK}: LL_ACK_HOLD_MS={s.ack_hold_ms} unsupported: {err}", file=sys.stderr)
            return 127
    runner = run_client if s.role == "client" else run_server
    code = 0
    try:
        asyncio.run(asyncio.wait_for(runner(s, applog, config), s.timeout_s))
    except asyncio.TimeoutError:
        print(f"{STACK} {s.role}: gave up after LL_TIMEOUT_S={s.timeout_s}", file=sys.stderr)
        code = 1
    except (ConnectionError, OSError, ValueError) as err:
        print(f"{STACK} {s.role}: {type(err).__name__}: {err}", file=sys.stderr)
        code = 1
    finally:
        if config.quic_logger is not None:
            config.quic_logger.flush()
        if config.secrets_log_file is not None:
            config.secrets_log_file.close()
        applog.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
