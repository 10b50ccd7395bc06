"""Shared by the virtual-time tests: the schedule they run and a run directory's
file digests (reruns are compared file by file)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.schedule import IidLoss, LinkSettings, Schedule


def lossy(seed: int) -> Schedule:
    """20 Mbit/s, 10 ms each way, a 60 kB queue, 2% iid loss: some of everything in
    a fraction of a second of virtual time."""
    return Schedule.constant(seed, LinkSettings(rate_bps=20_000_000, delay_us=10_000, queue_bytes=60_000,
                                                loss=IidLoss(0.02)))


def files(d: Path) -> dict[str, str]:
    """Relative path → SHA-256 of every file below `d`."""
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}
