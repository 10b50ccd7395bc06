"""`longlook versions STACK --from A --to B`: one stack's releases side by side.

For each release the registry serves between A and B (harness.endpoints.releases
installs each on first use), the same checks run:

- the **reference schedules** (clean, lossy, reordering, a bandwidth drop;
  `REFERENCE`), several runs each with different seeds: goodput per run, and the
  congestion-state transitions the sender went through (inferred from its qlog as
  the report infers them, harness.observe.states);
- the **properties** (`pytest properties/ --impl STACK@VERSION`), whose per-case
  outcomes land in the release's results file, the same records `longlook report`
  reads.

Then consecutive releases are compared (harness.versions.compare): a property case
whose outcome changed, a transition that appeared or disappeared, and a goodput change
with its significance over the runs (Mann–Whitney U). Everything is kept under OUT
and reused: an interrupted sweep continues where it stopped.
"""

from __future__ import annotations

from harness.reproduce.experiments import MB, MBIT, Experiment, Point

RTT_US = 40_000
RATE = 20 * MBIT


def _point(x: int, **kw) -> Point:
    return Point(x, rate_bps=kw.pop("rate_bps", RATE), rtt_us=RTT_US, loss=kw.pop("loss", 0.0), **kw)


#: The reference schedules, by the number the sweep keys them with. One BDP of
#: drop-tail queue; the drop leaves the queue's bytes, so it then holds 5× the delay.
REFERENCE = Experiment(
    name="versions-reference",
    title="reference schedules for comparing releases",
    source="longlook's own (docs/versions.md)",
    axis="schedule",
    size_bytes=2 * MB,
    points=(
        _point(0),
        _point(1, loss=0.01),
        _point(2, jitter_us=10_000, reorders=True),
        _point(3, drop_to_bps=4 * MBIT, drop_at_us=400_000),
    ),
    runs=5,
    quick=(0, 1, 2, 3),
)
SCHEDULES = {0: "clean", 1: "lossy", 2: "reordering", 3: "drop"}
DESCRIBE = {
    "clean": "20 Mbit/s, 40 ms RTT, one BDP of queue",
    "lossy": "the same with 1% random loss each way",
    "reordering": "the same with 0–10 ms of jitter that reorders",
    "drop": "the same, dropping to 4 Mbit/s 0.4 s in",
}
#: Runs per schedule: enough for Mann–Whitney U to reach p < 0.05 (4 against 4
#: can, 3 against 3 cannot: its smallest two-sided p is 0.1).
RUNS, QUICK_RUNS = 5, 4
