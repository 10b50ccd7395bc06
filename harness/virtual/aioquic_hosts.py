"""aioquic as the two hosts of a virtual run: QuicConnection objects driven by the
event loop, with the same HTTP/0.9 (hq-interop) application and the same app log
events as the real endpoint (harness/endpoints/aioquic/endpoint.py):

- client: one request per object, all at once (multiplexing), one after another
  (transfer), or with think time between them (appidle); then a PING whose ACK
  proves the server saw the ACK of its last bytes, then CONNECTION_CLOSE;
- server: answers `GET /name` from the www directory; `request_done` when every
  byte and the FIN of a response are acknowledged.
"""

from __future__ import annotations

import json
from pathlib import Path

from aioquic.buffer import Buffer
from aioquic.quic import events as ev
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
# PACKET_TYPE_INITIAL: an int before aioquic 1.2, the QuicPacketType member since (harness.endpoints.releases).
from aioquic.quic.packet import PACKET_TYPE_INITIAL, pull_quic_header

from harness.virtual.loop import Host
from harness.virtual.qlog_sink import SETTLE_BATCH, VirtualQlog

ALPN = ["hq-interop"]
SERVER_NAME = "server.longlook.test"
NATIVE_CC = {"newreno": "reno", "reno": "reno", "cubic": "cubic"}
#: As the real client: a final PING unanswered within this long is no failure, s.
PING_WAIT_S = 5.0
#: As the real client: how long it waits for its close to complete, s.
CLOSE_WAIT_S = 2.0


class AppLog:
    """The app log (LL_APPLOG format) with virtual times."""

    def __init__(self, path: Path, epoch_unix_ns: int):
        self.fp = path.open("w")
        self.epoch_us = epoch_unix_ns // 1000

    def event(self, now_ns: int, event: str, **fields) -> None:
        self.fp.write(json.dumps({"t_us": now_ns // 1000, "event": event, **fields}) + "\n")

    def version(self, version: str, cc: str, native_cc: str) -> None:
        self.fp.write(json.dumps({"event": "version", "stack": "aioquic", "version": version, "cc": cc,
                                  "native_cc": native_cc, "t_us": 0, "wall_us": self.epoch_us}) + "\n")


def configuration(*, is_client: bool, cc: str, flow_window: int, max_datagram_size: int,
                  keylog: Path, certs: Path | None, qlog: VirtualQlog | None = None):
    config = QuicConfiguration(is_client=is_client, alpn_protocols=ALPN, congestion_control_algorithm=cc,
                               max_data=flow_window, max_stream_data=flow_window,
                               max_datagram_size=max_datagram_size, quic_logger=qlog)
    config.secrets_log_file = keylog.open("w")
    if is_client:
        import ssl

        config.verify_mode = ssl.CERT_NONE
        config.server_name = SERVER_NAME
    else:
        config.load_cert_chain(certs / "cert.pem", certs / "priv.key")
    return config


def write_qlogs(config, qlog_dir: Path) -> None:
    """One JSON document per connection named by its ODCID, as the real endpoint."""
    if config.quic_logger is not None:
        config.quic_logger.write(qlog_dir)


class AioquicHost(Host):
    conn = None
    qlog: VirtualQlog | None = None

    def timer_s(self) -> float | None:
        return self.conn.get_timer() if self.conn is not None else None

    def on_timer(self, now_s: float, now_ns: int) -> None:
        self.conn.handle_timer(now_s)
        self._events(now_ns)

    def flush(self, now_s: float, now_ns: int) -> list[bytes]:
        if self.conn is None:
            return []
        datagrams = [data for data, _ in self.conn.datagrams_to_send(now_s)]
        if self.qlog is not None:
            # Sending is the last call into the connection at an instant: the
            # events logged so far will not change any more.
            self.qlog.settle(SETTLE_BATCH)
        return datagrams

    def _events(self, now_ns: int) -> None:
        while (event := self.conn.next_event()) is not None:
            self.on_event(event, now_ns)

    def on_event(self, event, now_ns: int) -> None:
        pass


class Server(AioquicHost):
    def __init__(self, addr: str, port: int, config, www: Path, applog: AppLog):
        super().__init__("server", addr, port)
        self.config = config
        self.qlog = config.quic_logger
        self.www = www.resolve()
        self.applog = applog
        self.requests: dict[int, bytes] = {}
        self.sending: dict[int, tuple[object, int]] = {}

    def receive(self, payload: bytes, peer, now_s: float, now_ns: int) -> None:
        if self.conn is None and not self._accept(payload):
            return
        self.conn.receive_datagram(payload, peer, now=now_s)
        self._events(now_ns)
        for stream_id, (stream, size) in list(self.sending.items()):
            if stream.sender.is_finished:
                del self.sending[stream_id]
                self.applog.event(now_ns, "request_done", stream=stream_id, bytes=size)

    def _accept(self, payload: bytes) -> bool:
        """Creates the connection on the client's first Initial, as aioquic's server does."""
        try:
            header = pull_quic_header(Buffer(data=payload), host_cid_length=self.config.connection_id_length)
        except ValueError:
            return False
        if header.packet_type != PACKET_TYPE_INITIAL:
            return False
        self.conn = QuicConnection(configuration=self.config, original_destination_connection_id=header.destination_cid)
        return True

    def on_event(self, event, now_ns: int) -> None:
        if isinstance(event, ev.StreamDataReceived) and event.stream_id not in self.sending:
            buf = self.requests.get(event.stream_id, b"") + event.data
            self.requests[event.stream_id] = buf
            if event.end_stream or buf.endswith(b"\n"):
                self._answer(event.stream_id, self.requests.pop(event.stream_id), now_ns)

    def _answer(self, stream_id: int, request: bytes, now_ns: int) -> None:
        parts = request.decode("ascii", "replace").split()
        path = (self.www / parts[1].lstrip("/")).resolve() if len(parts) >= 2 else None
        if path is None or parts[0] != "GET" or self.www not in path.parents or not path.is_file():
            self.conn.reset_stream(stream_id, 1)
            return
        data = path.read_bytes()
        self.applog.event(now_ns, "request_start", stream=stream_id, bytes=len(data))
        self.conn.send_stream_data(stream_id, data, end_stream=True)
        self.sending[stream_id] = (self.conn._streams[stream_id], len(data))  # noqa: SLF001 — as the endpoint


class Client(AioquicHost):
    """Fetches `names` per `testcase`; `finished()` once closed or given up."""

    def __init__(self, addr: str, port: int, config, server: tuple[str, int], names: list[str],
                 testcase: str, think_ms: int, downloads: Path, applog: AppLog):
        super().__init__("client", addr, port)
        self.conn = QuicConnection(configuration=config)
        self.qlog = config.quic_logger
        self.server = server
        self.queue = list(names)
        self.testcase = testcase
        self.think_ns = think_ms * 1_000_000
        self.downloads = downloads
        self.applog = applog
        self.pending: dict[int, tuple[str, bytearray]] = {}
        self.sizes: dict[str, int] = {}
        self.error: str | None = None
        self.phase = "handshake"  # → requests → ping → closing → done
        self.wake_ns: int | None = None
        self.started = False

    def start(self, now_s: float) -> None:
        self.conn.connect(self.server, now=now_s)

    def app_deadline_ns(self) -> int | None:
        return self.wake_ns

    def on_app_timer(self, now_ns: int) -> None:
        self.wake_ns = None
        if self.phase == "requests":
            self.applog.event(now_ns, "idle_end")
            self._request(self.queue.pop(0), now_ns)
        elif self.phase == "ping":
            self._close(now_ns)  # the PING went unanswered: no failure, as in the real client
        elif self.phase == "closing":
            self.phase = "done"

    def receive(self, payload: bytes, peer, now_s: float, now_ns: int) -> None:
        self.conn.receive_datagram(payload, peer, now=now_s)
        self._events(now_ns)

    def finished(self) -> bool:
        return self.phase == "done"

    def on_event(self, event, now_ns: int) -> None:
        if isinstance(event, ev.HandshakeCompleted) and self.phase == "handshake":
            self.phase = "requests"
            batch = self.queue if self.testcase == "multiplexing" else self.queue[:1]
            for name in list(batch):
                self.queue.remove(name)
                self._request(name, now_ns)
        elif isinstance(event, ev.StreamDataReceived) and event.stream_id in self.pending:
            name, buf = self.pending[event.stream_id]
            buf += event.data
            if event.end_stream:
                self._done(event.stream_id, now_ns)
        elif isinstance(event, ev.StreamReset) and event.stream_id in self.pending:
            self._fail(f"stream {event.stream_id} reset by the server ({event.error_code})")
        elif isinstance(event, ev.PingAcknowledged) and self.phase == "ping":
            self._close(now_ns)
        elif isinstance(event, ev.ConnectionTerminated):
            if self.pending or self.queue:
                self._fail(f"connection closed: {event.reason_phrase}")
            self.phase = "done"

    def _request(self, name: str, now_ns: int) -> None:
        stream_id = self.conn.get_next_available_stream_id()
        self.pending[stream_id] = (name, bytearray())
        self.applog.event(now_ns, "request_start", stream=stream_id, bytes=0)
        self.conn.send_stream_data(stream_id, f"GET /{name}\r\n".encode(), end_stream=True)

    def _done(self, stream_id: int, now_ns: int) -> None:
        name, buf = self.pending.pop(stream_id)
        (self.downloads / name).write_bytes(bytes(buf))
        self.sizes[name] = len(buf)
        self.applog.event(now_ns, "request_done", stream=stream_id, bytes=len(buf))
        if self.queue and not self.pending:
            if self.testcase == "appidle":
                self.applog.event(now_ns, "idle_start")
                self.wake_ns = now_ns + self.think_ns
            else:
                self._request(self.queue.pop(0), now_ns)
        elif not self.queue and not self.pending:
            self.phase = "ping"
            self.conn.send_ping(1)
            self.wake_ns = now_ns + int(PING_WAIT_S * 1e9)

    def _close(self, now_ns: int) -> None:
        self.phase = "closing"
        self.conn.close()
        self.wake_ns = now_ns + int(CLOSE_WAIT_S * 1e9)

    def _fail(self, reason: str) -> None:
        self.error = self.error or reason
        self.pending.clear()
        self.queue.clear()
        self.phase = "done"
