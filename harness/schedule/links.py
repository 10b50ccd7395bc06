"""The clean links every strategy lays its impairments on, the seeds it draws, and
the replay hook (--longlook-replay) every strategy builder wears. Apart from
strategies.py so that the strategy modules beside it (outages.py, handshake.py,
directed.py) share them without importing each other; strategies.py re-exports them."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from harness import rfc
from harness.schedule.types import FlowSelector, LinkSettings, Phase, Schedule

#: kPacketThreshold (RFC 9002 §6.1.1): reordering by fewer packets is not loss.
K_PACKET_THRESHOLD = rfc.K_PACKET_THRESHOLD
QUIC = FlowSelector("udp")
MTU = 1500
#: Set by the pytest plugin's --longlook-replay: every strategy then yields the saved
#: schedule, so a failure re-runs exactly.
REPLAY_ENV = "LONGLOOK_REPLAY"


def _saved_example() -> dict | None:
    saved = os.environ.get(REPLAY_ENV)
    return json.loads((Path(saved) / "example.json").read_text()) if saved else None


def replayable(builder):
    """Makes a strategy builder yield the schedule saved in $LONGLOOK_REPLAY, if set."""
    @functools.wraps(builder)
    def wrapper(*args, **kwargs):
        example = _saved_example()
        if example is not None:
            return st.just(Schedule.from_json(example["schedule"]))
        return builder(*args, **kwargs)

    return wrapper


def replayed_plan_value(field: str, drawn: st.SearchStrategy, of_plan=lambda value: value) -> st.SearchStrategy:
    """`drawn`, or under $LONGLOOK_REPLAY the value the saved example's plan ran with:
    for a property that draws part of its plan (a window cap, a pause) as well as its
    schedule, so a replay runs that plan again. `of_plan` turns the plan's field back
    into what the property draws."""
    example = _saved_example()
    if example is None:
        return drawn
    return st.just(of_plan(example["plan"].get(field, 0)))


@dataclass(frozen=True)
class BaseLink:
    """The clean link an example's impairments are laid on."""

    rate_bps: int = 20_000_000
    rtt_us: int = 40_000

    @property
    def bdp_bytes(self) -> int:
        return self.rate_bps * self.rtt_us // 8_000_000

    def settings(self, queue_bdp: float = 1.0, **extra) -> LinkSettings:
        """Both directions' settings: rate, half the RTT each way, a queue of
        `queue_bdp` BDPs (at least 10 packets)."""
        queue = max(int(self.bdp_bytes * queue_bdp), 10 * MTU)
        return LinkSettings(rate_bps=self.rate_bps, delay_us=self.rtt_us // 2, queue_bytes=queue, **extra)

    def schedule(self, seed: int, s2c: LinkSettings | None = None, actions=(), phases=(),
                 queue_bdp: float = 1.0) -> Schedule:
        clean = self.settings(queue_bdp)
        first = Phase(start_us=0, c2s=clean, s2c=s2c or clean)
        return Schedule(seed=seed, phases=(first, *phases), actions=tuple(actions))


base_links = st.builds(
    BaseLink,
    rate_bps=st.sampled_from([20_000_000, 10_000_000, 50_000_000]),
    rtt_us=st.sampled_from([40_000, 20_000, 80_000]),
)
seeds = st.integers(min_value=0, max_value=2**16)
#: Data packet indices of the QUIC flow, after the handshake and early slow start.
data_indices = st.integers(min_value=20, max_value=600)
