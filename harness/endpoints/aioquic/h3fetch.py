"""HTTP/3 for the aioquic endpoint's client, so that it can download from a server
that speaks only h3 (a production HTTP/3 server: harness/endpoints/caddy).

The client offers ALPN `hq-interop` first and `h3` second; a server that speaks
both (ours) picks hq-interop, one that speaks only h3 picks h3, and then the
requests go through here: `GET /NAME` with the usual pseudo-headers, the response
body written to LL_DOWNLOADS/NAME, done at the response's end of stream. Downloads
only: uploading to a production server is no part of the contract. Standalone like
endpoint.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path


class H3Client:
    """The h3 requests of one client connection; `handle` takes every QUIC event."""

    def __init__(self, quic, authority: str, loop: asyncio.AbstractEventLoop):
        from aioquic.h3.connection import H3Connection

        self._quic = quic
        self._h3 = H3Connection(quic)
        self._authority = authority.encode()
        self._loop = loop
        # stream → (future of the body's size, open file, [bytes so far], [status]).
        self._pending: dict[int, tuple[asyncio.Future, object, list[int], list[bytes]]] = {}

    def get(self, name: str, target: Path) -> tuple[int, asyncio.Future]:
        """Sends GET /name on a new stream; the future gives the body's size."""
        stream_id = self._quic.get_next_available_stream_id()
        target.parent.mkdir(parents=True, exist_ok=True)
        done = self._loop.create_future()
        self._pending[stream_id] = (done, open(target, "wb"), [0], [b""])
        self._h3.send_headers(stream_id, [(b":method", b"GET"), (b":scheme", b"https"),
                                          (b":authority", self._authority), (b":path", f"/{name}".encode()),
                                          (b"user-agent", b"longlook-aioquic")], end_stream=True)
        return stream_id, done

    def handle(self, event) -> None:
        from aioquic.h3.events import DataReceived, HeadersReceived

        for h in self._h3.handle_event(event):
            if h.stream_id not in self._pending:
                continue
            done, fp, count, status = self._pending[h.stream_id]
            if isinstance(h, HeadersReceived):
                status[0] = dict(h.headers).get(b":status", b"")
            elif isinstance(h, DataReceived):
                fp.write(h.data)
                count[0] += len(h.data)
            if getattr(h, "stream_ended", False):
                fp.close()
                del self._pending[h.stream_id]
                if status[0] != b"200":
                    done.set_exception(ConnectionError(f"stream {h.stream_id}: HTTP status "
                                                       f"{status[0].decode(errors='replace') or 'missing'}"))
                else:
                    done.set_result(count[0])

    def fail_all(self, why: str) -> None:
        for done, fp, _, _ in self._pending.values():
            fp.close()
            if not done.done():
                done.set_exception(ConnectionError(why))
        self._pending.clear()
