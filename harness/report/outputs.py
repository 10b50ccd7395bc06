"""What `longlook transfer --out DIR` leaves for a human and for the TLA+ trace
validation: one NDJSON trace per connection and vantage, the data sender's cwnd
plot and state diagrams, and the qlog conformance findings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path


def write_observation(run_dir: Path, stack_name: str, writes_qlog: bool, cc_family_beta: float | None) -> list[str]:
    """Writes traces/*.ndjson, report/* and qlog-conformance.json into `run_dir`.
    Returns notes for the user (what could not be produced and why); never raises
    for a stack's odd output, since the transfer itself already succeeded."""
    from harness.observe.conformance import check_run
    from harness.observe.qlog import read_run

    notes: list[str] = embed_secrets(run_dir)
    if writes_qlog:
        runs = read_run(run_dir, stack_name)
    else:
        wire = wire_only_sender(run_dir, stack_name)
        if wire is None:
            return notes + [f"{stack_name} writes no qlog and its capture cannot be decrypted: no traces or plots"]
        runs = {"server": [wire]}
        notes.append(f"{stack_name} writes no qlog: its trace and window are derived from the capture")
    traces_dir = run_dir / "traces"
    traces_dir.mkdir(exist_ok=True)
    for vantage, traces in runs.items():
        for i, trace in enumerate(traces):
            path = traces_dir / f"{vantage}-{i}.ndjson"
            with path.open("w") as f:
                for e in trace.events:
                    f.write(json.dumps(e.to_json()) + "\n")
            if trace.partial:
                notes.append(f"{path.name}: partial ({'; '.join(trace.notes[-1:])})")
    findings = check_run(run_dir, stack_name) if writes_qlog else []
    (run_dir / "qlog-conformance.json").write_text(json.dumps([dataclasses.asdict(f) for f in findings], indent=2, default=str) + "\n")
    if not report_sender(runs, run_dir, run_dir / "report", cc_family_beta) and runs.get("server"):
        notes.append(f"{stack_name}'s log has no congestion window (docs/trace.md): no cwnd plot")
    return notes


def wire_only_sender(run_dir: Path, stack_name: str):
    """The data sender's trace from its side's decrypted capture (sends, ACKs, losses
    presumed by RFC 9002's thresholds, a lower bound of its window), for a stack that
    writes no log; None when there is no capture or no key log decrypts it."""
    from harness.observe.join import busiest_connection, run_wire, wire_trace
    from harness.observe.wire import WireError

    if _direction(run_dir) != "download":
        return None  # a no-log stack here is a server; an upload's sender is a client
    try:
        view = run_wire(run_dir, "server")
    except (WireError, OSError, ValueError):
        return None
    conn = busiest_connection(view, "s2c")
    if conn is None:
        return None
    trace = wire_trace(view, conn, "server", stack_name, losses=True)
    return dataclasses.replace(trace, notes=[*trace.notes, f"{stack_name} writes no log: every event derived from "
                                                           "the capture"])


def report_sender(runs: dict, run_dir: Path, out_dir: Path, beta: float | None, name: str | None = None) -> dict:
    """The data sender's cwnd plot and state diagrams (harness.report.write_report)
    into `out_dir`, from the traces `read_run` gave; {} when the server left none or
    its log has no congestion window (Chromium's NetLog)."""
    senders = runs.get("server", [])
    if not senders:
        return {}
    from harness.observe.events import Metrics, PacketSent
    from harness.report import write_report

    sender = max(senders, key=lambda t: len(t.of(PacketSent)))
    if not any(m.congestion_window is not None for m in sender.of(Metrics)):
        return {}
    sizes = [p.size for p in sender.of(PacketSent) if p.size]
    title = None
    if "derived from the capture" in " ".join(sender.notes):
        title = f"{sender.stack} server: window derived from the capture (a lower bound)"
    if _direction(run_dir) == "upload":  # the sender is the client, on the link's server side
        name = name or f"{sender.stack}-client"
        title = f"{sender.stack} client (upload): congestion window over time"
    return write_report(sender, out_dir, beta=beta, mss=max(sizes, default=1200),
                        ground_truth=run_dir / "link.ndjson", name=name, title=title)


def _direction(run_dir: Path) -> str:
    """The run's direction as result.json records it ("download" when it does not)."""
    try:
        return json.loads((run_dir / "result.json").read_text()).get("direction") or "download"
    except (OSError, ValueError, AttributeError):
        return "download"


def plot_example(run_dir: Path, stack_name: str, out_dir: Path, beta: float | None, name: str) -> dict:
    """What `longlook transfer` draws, for a property's kept example directory: the
    sender's cwnd plot and state diagrams into `out_dir` (files named `name`-…).
    {} when the example holds no qlog."""
    from harness.observe.qlog import read_run

    if not any(p.is_file() for p in (run_dir / "server" / "qlog").glob("*")):
        return {}
    return report_sender(read_run(run_dir, stack_name), run_dir, out_dir, beta, name)


def embed_secrets(run_dir: Path) -> list[str]:
    """Writes pcap/<side>-with-keys.pcapng: the capture with the key log embedded
    (a Decryption Secrets Block), so Wireshark decrypts it on its own. Uses
    editcap (Wireshark's, from the tshark package) rather than writing pcapng blocks
    by hand; without it, says so."""
    import shutil
    import subprocess

    keys = run_dir / "server" / "keys.log"
    if not keys.exists() or keys.stat().st_size == 0:
        keys = run_dir / "client" / "keys.log"
    if not keys.exists() or keys.stat().st_size == 0:
        return []
    editcap = shutil.which("editcap")
    if editcap is None:
        return ["editcap not found (apt-get install tshark): no pcapng with embedded secrets"]
    notes = []
    for side in ("client", "server"):
        pcap = run_dir / "pcap" / f"{side}.pcap"
        if pcap.exists():
            out = pcap.with_name(f"{side}-with-keys.pcapng")
            r = subprocess.run([editcap, "--inject-secrets", f"tls,{keys}", str(pcap), str(out)],
                               capture_output=True, text=True, check=False)
            if r.returncode != 0:
                notes.append(f"editcap could not embed the secrets into {out.name}: {r.stderr.strip()[:200]}")
    return notes
