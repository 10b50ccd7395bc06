"""--shard I/N: one of N deterministic parts of the collected cases, so that N
machines (a CI job matrix) run the suite between them and `longlook report` merges
their results files into the matrix one run would have made.

The split is a greedy balance: cases in a fixed order (longest first when durations
are known, else by node id) each go to the part with the least total so far (ties
to the lowest part). Durations come from earlier results files (`--shard-durations
RESULTS…`, the records' duration_s per node id); a case they do not know counts as
their median (1 without any). Every machine computes the same split from the same
collection and the same durations: nothing is exchanged.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Iterable

SHARD = re.compile(r"^(\d+)/(\d+)$")


class ShardError(ValueError):
    """A --shard or --shard-durations value that cannot be used; says the fix."""


def parse(value: str) -> tuple[int, int]:
    """"I/N" → (I, N), 1 ≤ I ≤ N."""
    m = SHARD.match(value.strip())
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ShardError(f"--shard {value!r}: give I/N with 1 ≤ I ≤ N, e.g. --shard 2/4")
    return int(m.group(1)), int(m.group(2))


def durations(paths: Iterable[Path]) -> dict[str, float]:
    """Node id → seconds, from results files (the later record of a case wins)."""
    from harness.results.store import ResultsError, read

    try:
        records = read(list(paths)).records
    except ResultsError as e:
        raise ShardError(f"--shard-durations: {e}") from None
    return {r["nodeid"]: float(r.get("duration_s") or 0.0) for r in records}


def split(nodeids: list[str], parts: int, known: dict[str, float] | None = None) -> list[list[str]]:
    """The node ids of each of `parts` parts; every id in exactly one."""
    known = known or {}
    default = statistics.median(known.values()) if known else 1.0
    cost = {n: known.get(n, default) for n in nodeids}
    order = sorted(nodeids, key=lambda n: (-cost[n], n)) if known else sorted(nodeids)
    loads = [0.0] * parts
    out: list[list[str]] = [[] for _ in range(parts)]
    for n in order:
        i = min(range(parts), key=lambda k: (loads[k], k))
        out[i].append(n)
        loads[i] += cost[n]
    return out


def part(nodeids: list[str], spec: str, durations_from: Iterable[Path] = ()) -> set[str]:
    """The node ids of part I of `spec` ("I/N"), balanced by the durations in the
    results files `durations_from`."""
    index, parts = parse(spec)
    return set(split(nodeids, parts, durations(durations_from))[index - 1])
