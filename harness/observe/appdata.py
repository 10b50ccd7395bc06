"""When the sender's application had nothing left to send, from the decrypted capture.

RFC 9002 §7.8 calls a sender application limited when bytes in flight are below its
window and it is not pacing limited; Appendix B.5 skips growth then
(IsAppOrFlowControlLimited). No stack logs it, and the window and bytes in flight
alone cannot tell an application that ran dry from a pacer or a sender that is
simply slow. The capture can: each response is one client-initiated bidirectional
stream (RFC 9000 §2.1), and the sender's STREAM frames show when it first sent the
last byte of each (the frame with FIN) and when it first sent data of a new one.

- **Dry** after the sender's packet that carried the FIN of the last response
  started so far: every byte the application had given it has been sent once.
- **Resumes** at the sender's first packet carrying data of a response not seen
  before (the application wrote again, on a new request).

Lost data is data to send again, and a probe resends data: harness/model/tracefile.py
ends a dry spell at a declared loss or a PTO expiry (until the next response ends),
and turns the rest into the model's SetAppLimited steps, judging bytes in flight
against the window itself. Packets are named by (space, packet number), as the trace names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.observe.quic_frames import Stream


@dataclass(frozen=True)
class AppMarks:
    #: The packets after which the application had nothing unsent.
    dry_after: frozenset = field(default_factory=frozenset)
    #: The packets that began a new response after a dry spell.
    resume_at: frozenset = field(default_factory=frozenset)


def _is_response(stream_id: int) -> bool:
    return stream_id % 4 == 0  # client-initiated, bidirectional: a request and its response


def app_marks(view, direction: str = "s2c") -> AppMarks:
    """The sender's dry and resume packets in `view` (harness.observe.wire.WireView of
    the sending side), for its busiest connection in `direction`."""
    sent = [d for d in view.datagrams if d.entered and d.direction == direction]
    counts: dict[int | None, int] = {}
    for d in sent:
        counts[d.conn] = counts.get(d.conn, 0) + 1
    conn = max(counts, key=counts.get) if counts else None
    started: set[int] = set()
    open_: set[int] = set()
    dry_after, resume_at = set(), set()
    dry = False
    for d in sent:
        if d.conn != conn:
            continue
        for p in d.packets:
            if p.space != "application" or p.pn is None:
                continue
            frames = [f for f in p.frames if isinstance(f, Stream) and _is_response(f.stream_id)]
            new = {f.stream_id for f in frames} - started
            if new and dry:
                resume_at.add((p.space, p.pn))
                dry = False
            started |= new
            open_ |= new
            finished = {f.stream_id for f in frames if f.fin} & open_
            if finished:
                open_ -= finished
                if not open_:
                    dry_after.add((p.space, p.pn))
                    dry = True
    return AppMarks(frozenset(dry_after), frozenset(resume_at))
