"""packet_acked derived from the ACK frames a trace logs (no stack here logs the
event itself): the first frame covering each sent packet number acknowledges it."""

from __future__ import annotations

import heapq
from typing import Any

from harness.observe import events as ev
from harness.observe.dialects._make import _acked


def _insert_at(events: list[ev.Event], inserts: list[tuple[int, ev.Event]]) -> list[ev.Event]:
    """`events` with each (position, event) of `inserts` placed before events[position],
    inserts at one position in their given order."""
    inserts = sorted(inserts, key=lambda pe: pe[0])  # stable: keeps their order
    out: list[ev.Event] = []
    j = 0
    for k, e in enumerate(events):
        while j < len(inserts) and inserts[j][0] <= k:
            out.append(inserts[j][1])
            j += 1
        out.append(e)
    out += [e for _, e in inserts[j:]]
    return out


def derive_acks(sent: dict[str, set[int]],
                acks: list[tuple[float, str, list[Any]]]) -> tuple[list[ev.PacketAcked], int]:
    """A PacketAcked at the first ACK frame covering each sent packet number, and
    the number of malformed ranges skipped."""
    acked, bad = _derive_acks(sent, acks)
    return [a for _, a in acked], bad


def _derive_acks(sent: dict[str, set[int]],
                 acks: list[tuple[float, str, list[Any]]]) -> tuple[list[tuple[int, ev.PacketAcked]], int]:
    """derive_acks, each PacketAcked with the index in `acks` of the frame that acknowledged it."""
    unacked = {space: set(pns) for space, pns in sent.items()}
    # Outstanding pns as a heap (a sorted list is one), popped lazily: its top is the
    # lowest unacked pn. ACK ranges re-report old packets in every frame; starting each
    # range there keeps the work proportional to what is newly acknowledged.
    lowest = {space: sorted(pns) for space, pns in unacked.items()}
    out: list[tuple[int, ev.PacketAcked]] = []
    bad = 0
    for i, (t, space, ranges) in sorted(enumerate(acks), key=lambda ia: ia[1][0]):
        pending = unacked.get(space)
        if not pending:
            continue
        if not isinstance(ranges, list):
            bad += 1
            continue
        heap = lowest[space]
        for r in ranges:
            try:
                lo, hi = int(r[0]), int(r[-1])
            except (TypeError, ValueError, IndexError, KeyError, OverflowError):
                bad += 1
                continue
            while heap and heap[0] not in pending:
                heapq.heappop(heap)
            if not heap:
                break
            lo = max(lo, heap[0])
            if lo > hi:
                continue
            if hi - lo < len(pending):
                hit = [pn for pn in range(lo, hi + 1) if pn in pending]
            else:  # a huge range: look only at what is outstanding
                hit = sorted(pn for pn in pending if lo <= pn <= hi)
            pending.difference_update(hit)
            out += [(i, _acked({"t_us": t, "pn": pn, "space": space})) for pn in hit]
    return out, bad
