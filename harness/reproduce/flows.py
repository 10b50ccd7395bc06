"""Per-flow throughput of a run with competing flows, from the link's ground truth.

Kakhki et al. report each flow's average throughput while the flows share the
bottleneck. Here: the bytes of each flow leaving the bottleneck in the data
direction (s2c) between the QUIC transfer's first and last departure, over that
time. The competitors are iperf3's parallel streams, one 5-tuple each; its control
connection carries a few hundred bytes and is left out by keeping the plan's number
of flows with the most bytes.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from harness.observe.groundtruth import read_log


def shares_mbps(run_dir: Path, transfer, tcp_flows: int) -> list[float]:
    """[the QUIC transfer's Mbit/s, then each competing TCP flow's, largest first]."""
    records = [r for r in read_log(run_dir / "link.ndjson").records if r.dir == "s2c" and r.dep_us is not None]
    # The transfer's listener (the server) sends s2c from its port.
    ours = [r for r in records if r.proto == transfer.proto and r.sport == transfer.port]
    if not ours:
        raise ValueError(f"{run_dir}: no packet of the transfer ({transfer.proto} port {transfer.port}) left the link")
    t0, t1 = min(r.dep_us for r in ours), max(r.dep_us for r in ours)
    if t1 <= t0:
        raise ValueError(f"{run_dir}: the transfer's packets left the link within one instant")
    seconds = (t1 - t0) / 1e6
    quic = sum(r.size for r in ours if t0 <= r.dep_us <= t1)
    theirs = {r.flow for r in ours}  # the transfer may itself be TCP (the baseline stack)
    tcp = Counter()
    for r in records:
        if r.proto == "tcp" and r.flow not in theirs and t0 <= r.dep_us <= t1:
            tcp[r.flow] += r.size
    competitors = sorted(tcp.values(), reverse=True)[:tcp_flows]
    competitors += [0] * (tcp_flows - len(competitors))
    return [round(b * 8 / seconds / 1e6, 4) for b in [quic, *competitors]]


def pair_shares_mbps(run_dir: Path, transfer, rival) -> list[float]:
    """[the transfer's Mbit/s, the rival's] while both sent: each flow's bytes leaving
    the bottleneck (s2c, from its server's port) between the later of their first
    departures and the earlier of their last, over that time. Prudentia judges a pair
    by the throughput each gets while they compete, not by either alone."""
    records = [r for r in read_log(run_dir / "link.ndjson").records if r.dir == "s2c" and r.dep_us is not None]
    flows = [[r for r in records if r.proto == f.proto and r.sport == f.port] for f in (transfer, rival)]
    for f, rs in zip((transfer, rival), flows):
        if not rs:
            raise ValueError(f"{run_dir}: no packet of the flow on {f.proto} port {f.port} left the link")
    t0 = max(min(r.dep_us for r in rs) for rs in flows)
    t1 = min(max(r.dep_us for r in rs) for rs in flows)
    if t1 <= t0:
        raise ValueError(f"{run_dir}: the two flows never sent at the same time")
    seconds = (t1 - t0) / 1e6
    return [round(sum(r.size for r in rs if t0 <= r.dep_us <= t1) * 8 / seconds / 1e6, 4) for rs in flows]


def object_completions_s(run_dir: Path) -> list[float]:
    """Each object's completion, seconds after the first request, in request order
    (the client's app log: request_start and request_done per stream)."""
    import json

    starts: dict[int, float] = {}
    dones: dict[int, float] = {}
    for line in (run_dir / "client" / "app.ndjson").read_text(errors="replace").splitlines():
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if ev.get("event") == "request_start":
            starts.setdefault(ev["stream"], ev["t_us"])
        elif ev.get("event") == "request_done":
            dones[ev["stream"]] = ev["t_us"]
    if not starts or set(dones) != set(starts):
        raise ValueError(f"{run_dir}: the app log has {len(starts)} requests and {len(dones)} completions")
    t0 = min(starts.values())
    order = sorted(starts, key=lambda s: (starts[s], s))
    return [round((dones[s] - t0) / 1e6, 6) for s in order]


def kendall_tau(xs: list[float]) -> float:
    """Kendall's tau-a between request order (the index) and completion time: 1 when
    objects complete in the order asked for. By hand: O(n²) over a few hundred objects,
    not worth a SciPy dependency."""
    n = len(xs)
    if n < 2:
        return 1.0
    score = sum((xs[j] > xs[i]) - (xs[j] < xs[i]) for i in range(n) for j in range(i + 1, n))
    return score / (n * (n - 1) / 2)
