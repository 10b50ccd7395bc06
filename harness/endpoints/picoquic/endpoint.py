"""longlook endpoint for picoquic, driven through aiopquic (docs/endpoints.md).

HTTP/0.9 over QUIC (ALPN hq-interop): the client sends `GET /NAME\\r\\n` and FIN on
a new bidirectional stream per request, the server answers with the file and FIN.
picoquic runs on aiopquic's network thread; this process only moves bytes
between files and aiopquic's per-stream rings on the asyncio thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import signal
import socket
import ssl
import sys
import time
from pathlib import Path

import aiopquic
from aiopquic import _build_info
from aiopquic.asyncio import QuicConnectionProtocol, connect, serve
from aiopquic.quic.configuration import QuicConfiguration
from aiopquic.quic.events import ConnectionTerminated, StreamDataReceived, StreamReset

import settings as settings_mod
from settings import Settings, Unsupported

ALPN = "hq-interop"
#: SNI the client sends: harness/testbed/certs.py's certificate name (an IP literal is no valid SNI).
SERVER_NAME = "server.longlook.test"
#: Bytes handed to aiopquic per call; must stay below its 4 MiB per-stream ring.
CHUNK = 1 << 20
#: Granularity of the server's request_done: how often it re-reads how much of a
#: response picoquic has taken from aiopquic's ring into packets.
DRAIN_POLL_S = 0.001


class AppLog:
    """NDJSON application events (times in µs of CLOCK_MONOTONIC); a no-op without a path."""

    def __init__(self, path: str | None):
        self._file = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "w", buffering=1)

    def write(self, event: str, **fields) -> None:
        if self._file is None:
            return
        record = {"t_us": time.monotonic_ns() // 1000, "event": event, **fields}
        self._file.write(json.dumps(record) + "\n")

    def version(self, cc: str, unsupported_now: list[str]) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps({
            "event": "version", "stack": "picoquic", "version": _build_info.PICOQUIC_VERSION,
            "binding": f"aiopquic {aiopquic.__version__}", "picoquic_sha": _build_info.PICOQUIC_SHA,
            "cc": cc, "unsupported": {k: OPTIONAL[k] for k in unsupported_now},
            # Read together, so readers can map picoquic's monotonic qlog clock onto
            # wall-clock time (and so onto the link's time base).
            "t_us": time.monotonic_ns() // 1000, "wall_us": time.time_ns() // 1000}) + "\n")


#: What this aiopquic's QuicConfiguration takes: releases before 0.6 (`--impl
#: picoquic@0.5.2`) have no `pmtud` or `ip_family`; main() refuses what cannot be
#: left out and the version event names what was.
_CONFIG_FIELDS = {f.name for f in dataclasses.fields(QuicConfiguration)}
#: Settings a release may lack, with what leaving one out means.
OPTIONAL = {"pmtud": "picoquic probes the path MTU, so datagrams may grow past max_datagram_size",
            "ip_family": "IPv6 cannot be chosen: an IPv6 run is refused"}


def unsupported(s: Settings) -> list[str]:
    """The optional settings this release lacks."""
    return [k for k in OPTIONAL if k not in _CONFIG_FIELDS]


def configuration(s: Settings) -> QuicConfiguration:
    """One QuicConfiguration for either role, with the contract's knobs applied."""
    if s.qlog_dir:
        Path(s.qlog_dir).mkdir(parents=True, exist_ok=True)  # picoquic does not create it
    if s.keylog_file:
        Path(s.keylog_file).parent.mkdir(parents=True, exist_ok=True)
    wanted = dict(
        alpn_protocols=[ALPN],
        is_client=s.role == "client",
        # Plain hq-interop: no DATAGRAM transport parameter.
        max_datagram_frame_size=None,
        max_data=s.flow_window,
        max_stream_data=s.flow_window,
        secrets_log_file=s.keylog_file,
        qlog_dir=s.qlog_dir,
        congestion_control_algorithm=s.cc,
        # No probing above the initial MTU keeps every datagram at max_datagram_size.
        pmtud="blocked",
        ip_family=socket.AF_INET6 if s.ip_version == 6 else socket.AF_INET,
        idle_timeout=max(30.0, s.timeout_s or 0.0),
    )
    cfg = QuicConfiguration(**{k: v for k, v in wanted.items() if k in _CONFIG_FIELDS})
    if s.role == "client":
        cfg.verify_mode = ssl.CERT_NONE  # QIR convention: self-signed test certificates
        cfg.server_name = SERVER_NAME
    else:
        cfg.load_cert_chain(str(Path(s.certs) / "cert.pem"), str(Path(s.certs) / "priv.key"))
    return cfg


#: Responses still running, over all connections: on SIGTERM the server lets them
#: finish (briefly) so their request_done reaches the app log, instead of cancelling
#: them between the last byte and the log line.
RESPONDING: set = set()
SHUTDOWN_GRACE_S = 1.0


class HqServer(QuicConnectionProtocol):
    """Serves files from `www` by name, one request per bidirectional stream."""

    def __init__(self, quic, stream_handler=None, *, www: Path, applog: AppLog):
        super().__init__(quic, stream_handler=stream_handler)
        self.www, self.applog = www, applog
        self._requests: dict[int, bytearray] = {}
        self._tasks: set[asyncio.Task] = set()
        #: Responses whose bytes are all handed to aiopquic (waiting in `_drained`).
        self._handed: set[asyncio.Task] = set()

    def quic_event_received(self, event) -> None:
        if isinstance(event, StreamDataReceived):
            buf = self._requests.setdefault(event.stream_id, bytearray())
            buf += event.data
            if event.end_stream:
                task = asyncio.ensure_future(self._respond(event.stream_id, bytes(buf)))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                RESPONDING.add(task)
                task.add_done_callback(RESPONDING.discard)
        elif isinstance(event, ConnectionTerminated):
            # A client that has all the bytes closes at once, often before the drain
            # poll sees the last of them packed: a response already handed over ends
            # its wait on `quic.closed` and logs request_done; the others are cancelled.
            for task in self._tasks - self._handed:
                task.cancel()

    def _resolve(self, request: bytes) -> Path | None:
        line = request.decode("latin-1").strip()
        if not line.startswith("GET /"):
            return None
        name = line[len("GET /"):]
        path = (self.www / name).resolve()
        if self.www.resolve() not in path.parents or not path.is_file():
            return None
        return path

    async def _respond(self, sid: int, request: bytes) -> None:
        quic = self._quic
        path = self._resolve(request)
        if path is None:
            print(f"picoquic server: stream {sid}: cannot serve {request!r}", file=sys.stderr)
            quic.reset_stream(sid, 0x10)
            return
        size = path.stat().st_size
        self.applog.write("request_start", stream=sid, bytes=size)
        with open(path, "rb") as f:
            sent = 0
            while True:
                chunk = f.read(CHUNK)
                sent += len(chunk)
                await quic.send_stream_data_drained(sid, chunk, end_stream=sent >= size)
                if sent >= size or quic.closed:
                    break
        # Data stays queued inside aiopquic until picoquic packs it; the contract's
        # request_done marks the end of that queue, not the end of our writes.
        task = asyncio.current_task()
        self._handed.add(task)
        try:
            await self._drained(sid, size)
        finally:
            self._handed.discard(task)
        self.applog.write("request_done", stream=sid, bytes=size)

    async def _drained(self, sid: int, size: int) -> None:
        """Returns once picoquic has packed all `size` bytes of stream `sid` (±1 ms).

        Polled: aiopquic's drain notice fires once per packet pulled, which would
        cost a Python wake-up per packet; a retired stream reads 0 and ends the wait.
        """
        quic = self._quic
        while not quic.closed and 0 < quic.tx_sent_bytes(sid) < size:
            await asyncio.sleep(DRAIN_POLL_S)


class HqClient(QuicConnectionProtocol):
    """Sends requests and writes each response to the downloads directory."""

    def __init__(self, quic, stream_handler=None):
        super().__init__(quic, stream_handler=stream_handler)
        self._open: dict[int, tuple] = {}  # sid -> (file, future, [bytes])

    async def request(self, name: str, target: Path) -> tuple[int, asyncio.Future]:
        """Sends the request; returns its stream and a future of the bytes received."""
        sid = self._quic.get_next_available_stream_id()
        fut = asyncio.get_running_loop().create_future()
        self._open[sid] = (open(target, "wb"), fut, [0])
        await self._quic.send_stream_data_drained(
            sid, f"GET /{name}\r\n".encode(), end_stream=True)
        return sid, fut

    def _finish(self, sid: int, error: Exception | None) -> None:
        f, fut, count = self._open.pop(sid)
        f.close()
        if not fut.done():
            fut.set_exception(error) if error else fut.set_result(count[0])

    def quic_event_received(self, event) -> None:
        if isinstance(event, StreamDataReceived) and event.stream_id in self._open:
            f, _, count = self._open[event.stream_id]
            f.write(event.data)
            count[0] += len(event.data)
            if event.end_stream:
                self._finish(event.stream_id, None)
        elif isinstance(event, StreamReset) and event.stream_id in self._open:
            self._finish(event.stream_id, ConnectionError(
                f"stream {event.stream_id} reset by server (error {event.error_code})"))
        elif isinstance(event, ConnectionTerminated):
            for sid in list(self._open):
                self._finish(sid, ConnectionError(
                    f"connection closed (error {event.error_code}) during stream {sid}"))


async def run_client(s: Settings, applog: AppLog) -> None:
    downloads = Path(s.downloads)
    downloads.mkdir(parents=True, exist_ok=True)
    first = s.requests[0]
    cfg = configuration(s)
    async with connect(first.host, first.port, configuration=cfg,
                       create_protocol=HqClient) as proto:

        async def fetch(name: str) -> None:
            sid, fut = await proto.request(name, downloads / name)
            applog.write("request_start", stream=sid, bytes=0)
            received = await fut
            applog.write("request_done", stream=sid, bytes=received)

        if s.testcase == "multiplexing":
            await asyncio.gather(*(fetch(r.name) for r in s.requests))
            return
        for i, r in enumerate(s.requests):
            if s.testcase == "appidle" and i > 0:
                applog.write("idle_start")
                await asyncio.sleep(s.think_ms / 1000)
                applog.write("idle_end")
            await fetch(r.name)


async def run_server(s: Settings, applog: AppLog) -> None:
    factory = functools.partial(HqServer, www=Path(s.www), applog=applog)
    server = await serve(s.addr, s.port, configuration=configuration(s), create_protocol=factory)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # picoquic's thread binds the socket; aiopquic's QuicServer does not expose it.
    transport = server._engine._transport
    deadline = time.monotonic() + 5
    while not transport.thread_ready:
        if time.monotonic() > deadline:
            raise OSError("picoquic's network thread did not come up within 5 s")
        await asyncio.sleep(0.001)
    print(json.dumps({"ready": True}), flush=True)
    try:
        await stop.wait()
        if RESPONDING:
            await asyncio.wait(set(RESPONDING), timeout=SHUTDOWN_GRACE_S)
    finally:
        server.close()


async def main_async(s: Settings) -> int:
    applog = AppLog(s.applog)
    applog.version(s.cc, unsupported(s))
    runner = run_client if s.role == "client" else run_server
    try:
        await asyncio.wait_for(runner(s, applog), s.timeout_s)
    except asyncio.TimeoutError:
        print(f"picoquic {s.role}: gave up after LL_TIMEOUT_S={s.timeout_s}", file=sys.stderr)
        return 1
    except (ConnectionError, OSError) as e:
        print(f"picoquic {s.role}: {e}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    try:
        s = settings_mod.load()
    except Unsupported as e:
        print(e, file=sys.stderr)
        return settings_mod.UNSUPPORTED
    except ValueError as e:
        print(f"picoquic endpoint: {e}", file=sys.stderr)
        return 2
    if s.ip_version == 6 and "ip_family" not in _CONFIG_FIELDS:
        print(f"picoquic endpoint: aiopquic {aiopquic.__version__} cannot choose IPv6 (no ip_family); "
              "use IPv4 or aiopquic >= 0.6", file=sys.stderr)
        return settings_mod.UNSUPPORTED
    return asyncio.run(main_async(s))


if __name__ == "__main__":
    sys.exit(main())
