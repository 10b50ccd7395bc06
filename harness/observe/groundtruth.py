"""The emulator's ground-truth log (NDJSON, docs/emulator.md) as Python values.

Parsing is strict: a missing or unknown field is an error naming the file and
line, because a silently ignored field would hide a drift between the
emulator and its spec.
"""

from __future__ import annotations

import itertools

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FATES = ("delivered", "dropped", "duplicate", "in_flight")
DROP_REASONS = ("blackhole", "loss_index", "loss_iid", "loss_ge", "queue_full", "malformed")
MARKS = ("ce", "held", "extra_delay", "corrupt", "reordered_by_jitter")


class LogFormatError(ValueError):
    """A ground-truth log line does not match docs/emulator.md."""


@dataclass(frozen=True)
class PacketRecord:
    """The final fate of one packet in one direction (times in µs since ready)."""

    dir: str  # "c2s" or "s2c"
    idx: int  # 0-based index among all packets of the direction
    fidx: int  # 0-based index within the 5-tuple flow and direction
    flow: str  # e.g. "udp 198.19.0.1:443>198.18.0.1:40000"
    proto: str  # "udp", "tcp", ...
    sport: int | None  # None for protocols without ports
    dport: int | None
    size: int  # IP packet size, bytes
    arr_us: float  # arrival at the router (the emulator writes ns resolution: 3 decimals)
    fate: str  # one of FATES
    reason: str | None  # one of DROP_REASONS when dropped
    dep_us: float | None  # departure (write into the peer's device); None if not delivered
    qbytes: int  # bottleneck queue bytes at arrival
    marks: tuple[str, ...] = ()  # subset of MARKS, delivered packets only

    @property
    def delay_us(self) -> float | None:
        """Time in the link (dep_us - arr_us), rounded to the log's ns resolution."""
        if self.dep_us is None:
            return None
        return round(self.dep_us - self.arr_us, 3)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> PacketRecord:
        """Build a record from one decoded log line; raises LogFormatError."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(value) - names
        missing = names - set(value) - {"marks"}
        if unknown or missing:
            raise LogFormatError(f"unknown fields {sorted(unknown)}, missing fields {sorted(missing)}")
        args = dict(value)
        args["marks"] = tuple(args.get("marks") or ())
        return cls(**args)


@dataclass(frozen=True)
class GroundTruth:
    """A parsed log: header, packet records in log order, summary (None if cut off)."""

    header: dict[str, Any]
    records: list[PacketRecord]
    summary: dict[str, Any] | None

    def __iter__(self):
        # Lets callers write `header, records, summary = read_log(path)`.
        return iter((self.header, self.records, self.summary))

    def server_side_addrs(self) -> set[str]:
        """The addresses packets leave the link's server side from (the sources of s2c
        records): where the data's sender is, whichever QUIC role it has."""
        sources = (r.flow.split(" ", 1)[-1].split(">", 1)[0].rsplit(":", 1)[0] for r in self.records if r.dir == "s2c")
        return set(itertools.islice(sources, 256))  # one host per side: a few records tell

    def select(self, direction: str, proto: str | None = None, port: int | None = None) -> list[PacketRecord]:
        """Return records of ``direction`` matching ``proto`` and either ``port``, by fidx order."""
        chosen = [
            r
            for r in self.records
            if r.dir == direction
            and (proto is None or r.proto == proto)
            and (port is None or port in (r.sport, r.dport))
        ]
        return sorted(chosen, key=lambda r: (r.flow, r.fidx))


def read_log(path: str | Path) -> GroundTruth:
    """Parse the NDJSON log at ``path``.

    Raises LogFormatError naming the file and line if a line is malformed or
    the header is missing. A log without summary (emulator killed) is accepted.
    """
    path = Path(path)
    header: dict[str, Any] | None = None
    records: list[PacketRecord] = []
    summary = None
    with path.open() as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                value = json.loads(line)
            except json.JSONDecodeError as err:
                raise LogFormatError(f"{where}: not JSON ({err})") from err
            if header is None:
                if "longlook_link" not in value:
                    raise LogFormatError(f"{where}: first line is not the header: {line.strip()[:120]}")
                header = value
            elif "summary" in value:
                summary = value["summary"]
            else:
                records.append(_record(value, where))
    if header is None:
        raise LogFormatError(f"{path}: empty log, no header")
    return GroundTruth(header, records, summary)


def _record(value: dict[str, Any], where: str) -> PacketRecord:
    """Parse one packet line, adding ``where`` to any error."""
    try:
        return PacketRecord.from_json(value)
    except (LogFormatError, TypeError) as err:
        raise LogFormatError(f"{where}: {err}") from err
