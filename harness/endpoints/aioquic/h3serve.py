"""HTTP/3 for the aioquic endpoint's server, so that a peer speaking only h3 (a
browser: harness/endpoints/chromium) can download from it and upload to it.

The server offers ALPN `hq-interop` and `h3`; when a connection picks h3, its
events come here instead of to the HTTP/0.9 handler. The contract is the same
(docs/endpoints.md): `GET /NAME` answers with the bytes of LL_WWW/NAME, and
`POST /NAME` (or PUT) stores the request body as LL_DOWNLOADS/NAME and answers 200
once the last byte is in. `GET /` answers a one-line page: a browser needs a
document of the origin to run its requests from. Standalone like endpoint.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

#: The page a browser loads first, so that its fetch() calls are same-origin.
ORIGIN_PAGE = b"<!doctype html><title>longlook</title><p>longlook test origin</p>\n"


class H3Server:
    """One h3 connection's requests. `applog` is the endpoint's AppLog;
    `on_sending(stream_id, size)` registers a response whose delivery the endpoint
    watches (its request_done comes when every byte is acknowledged)."""

    def __init__(self, quic, www: Path, downloads: Path, applog, on_sending: Callable[[int, int], None]):
        from aioquic.h3.connection import H3Connection

        self._quic = quic
        self._h3 = H3Connection(quic)
        self._www = www.resolve()
        self._downloads = downloads
        self._applog = applog
        self._on_sending = on_sending
        # Uploads in progress: stream → [open file, bytes stored].
        self._storing: dict[int, list] = {}

    def handle(self, event) -> None:
        from aioquic.h3.events import DataReceived, HeadersReceived

        for h in self._h3.handle_event(event):
            if isinstance(h, HeadersReceived):
                headers = dict(h.headers)
                method = headers.get(b":method", b"").decode("ascii", "replace")
                path = headers.get(b":path", b"/").decode("ascii", "replace").split("?", 1)[0]
                if method == "GET":
                    self._get(h.stream_id, path)
                elif method in ("POST", "PUT"):
                    self._open_upload(h.stream_id, path)
                    if h.stream_ended:
                        self._finish_upload(h.stream_id)
                else:
                    self._respond(h.stream_id, 405)
            elif isinstance(h, DataReceived) and h.stream_id in self._storing:
                store = self._storing[h.stream_id]
                if store[0] is not None:
                    store[0].write(h.data)
                store[1] += len(h.data)
                if h.stream_ended:
                    self._finish_upload(h.stream_id)

    def _respond(self, stream_id: int, status: int, body: bytes = b"", content_type: bytes = b"text/plain") -> None:
        self._h3.send_headers(stream_id, [(b":status", str(status).encode()), (b"content-type", content_type),
                                          (b"content-length", str(len(body)).encode())], end_stream=not body)
        if body:
            self._h3.send_data(stream_id, body, end_stream=True)

    def _get(self, stream_id: int, path: str) -> None:
        if path == "/":
            self._respond(stream_id, 200, ORIGIN_PAGE, b"text/html")
            return
        target = (self._www / path.lstrip("/")).resolve()
        if self._www not in target.parents or not target.is_file():
            self._respond(stream_id, 404)  # a browser asks for /favicon.ico
            return
        data = target.read_bytes()
        self._applog.event("request_start", stream=stream_id, bytes=len(data))
        self._h3.send_headers(stream_id, [(b":status", b"200"), (b"content-type", b"application/octet-stream"),
                                          (b"content-length", str(len(data)).encode())])
        self._h3.send_data(stream_id, data, end_stream=True)
        self._on_sending(stream_id, len(data))

    def _open_upload(self, stream_id: int, path: str) -> None:
        name = path.lstrip("/")
        if not name or "/" in name or name in (".", ".."):
            print(f"aioquic server: bad h3 upload path {path!r}", file=sys.stderr)
            self._storing[stream_id] = [None, 0]
            return
        self._downloads.mkdir(parents=True, exist_ok=True)
        self._storing[stream_id] = [open(self._downloads / name, "wb"), 0]
        self._applog.event("request_start", stream=stream_id, bytes=0)

    def _finish_upload(self, stream_id: int) -> None:
        fp, size = self._storing.pop(stream_id)
        if fp is None:
            self._respond(stream_id, 400)
            return
        fp.close()
        self._applog.event("request_done", stream=stream_id, bytes=size)
        self._respond(stream_id, 200)
