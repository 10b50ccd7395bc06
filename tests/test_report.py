"""Reports (harness.report): the cwnd plot and the state-transition diagram are produced.

The plot is checked as a readable PNG of the expected size and by what it shows: the
pixels where the figure's transforms place each drop, reorder, declared loss, phase
change and state span have that mark's colour. The diagram's DOT text is checked for
the states and the counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from harness.observe.groundtruth import GroundTruth, PacketRecord
from harness.observe.events import STATES, CongestionState, Metrics, PacketLost, Trace
from harness.observe.states import infer_states
from harness.report import STATE_COLOURS, write_report
from harness.report.diagram import DiagramError, count_visits, state_diagram, to_dot
from harness.report.plots import DPI, DROP_COLOURS, _series, _value_at, cwnd_figure, plot_cwnd
from test_states import MSS, simulate  # tests/ is on sys.path (see conftest.py)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FIXTURES = Path(__file__).parent / "fixtures" / "qlog"


def record(idx: int, t_us: float, fate: str = "delivered", reason: str | None = None, marks=()) -> PacketRecord:
    return PacketRecord(dir="s2c", idx=idx, fidx=idx, flow="udp 198.19.0.1:443>198.18.0.1:40000", proto="udp",
                        sport=443, dport=40000, size=1228, arr_us=t_us, fate=fate, reason=reason,
                        dep_us=None if fate == "dropped" else t_us + 20_000, qbytes=0, marks=tuple(marks))


def ground_truth() -> GroundTruth:
    header = {"longlook_link": "0.1.0", "schedule": {"seed": 1, "phases": [{"start_us": 0}, {"start_us": 300_000}]}}
    records = [record(0, 1000), record(1, 150_000, "dropped", "queue_full"),
               record(2, 200_000, marks=("held",)), record(3, 250_000, "dropped", "loss_iid")]
    return GroundTruth(header, records, None)


def assert_png(path: Path, min_width: int = 600, min_height: int = 200) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    height, width = plt.imread(path).shape[:2]
    assert width >= min_width and height >= min_height, f"{path}: {width}x{height} px"


def test_state_colours_cover_the_model_states():
    assert set(STATE_COLOURS) == set(STATES)


def _rgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=float)


class _Png:
    """The saved PNG read back, addressed through the figure's own transforms (the
    figure `cwnd_figure` returns for the same inputs lays out identically)."""

    def __init__(self, path: Path, fig):
        self.pixels = plt.imread(path)[:, :, :3] * 255.0
        self.scale = DPI / fig.dpi
        self.height = self.pixels.shape[0]

    def near(self, transform, x: float, y: float, colour: str, radius: int = 2, tol: float = 40.0) -> bool:
        """Whether a pixel within `radius` of the point (x, y) in `transform`'s
        coordinates has `colour` (within `tol` per channel: antialiasing)."""
        px, py = transform.transform((x, y)) * self.scale
        col, row = int(round(px)), int(round(self.height - py))
        patch = self.pixels[max(row - radius, 0):row + radius + 1, max(col - radius, 0):col + radius + 1]
        return bool((np.abs(patch - _rgb(colour)).max(axis=-1) <= tol).any())


def test_plot_shows_losses_drops_reorders_phases_and_states(tmp_path):
    """Each thing the plot claims to show is there, in its colour, where it belongs
    (drawn without the ground truth the link marks are not: the check can fail)."""
    trace = simulate(300, lose=(60, 130))
    trace.events.insert(0, CongestionState(0, "SlowStart", raw="slow_start"))
    inferred = infer_states(trace, beta=0.5, mss=MSS)
    gt = ground_truth()
    out = plot_cwnd(trace, gt, out_png=tmp_path / "cwnd.png", inferred=inferred, spurious={130})
    assert out == tmp_path / "cwnd.png"
    assert_png(out)
    fig = cwnd_figure(trace, gt, inferred=inferred, spurious={130})
    try:
        ax, band = fig.axes[:2]
        png = _Png(out, fig)
        edge = ax.get_xaxis_transform()
        drops = [r for r in gt.records if r.fate == "dropped"]
        assert len(drops) == 2
        for r in drops:  # along the top edge, in the colour of the reason
            assert png.near(edge, r.arr_us / 1e6, 0.985, DROP_COLOURS[r.reason]), f"drop {r.idx} ({r.reason})"
        assert png.near(edge, 0.2, 0.015, "#E66100"), "the held packet along the bottom edge"
        lost = [e for e in trace.of(PacketLost) if e.pn == 60]
        assert lost, "the simulated trace declares packet 60 lost"
        ts, vs = _series(trace)["congestion_window"]
        t = lost[0].t_us / 1e6
        assert png.near(ax.transData, t, _value_at((ts, vs), t), "#CC0000"), "the declared loss on the cwnd line"
        top = ax.get_ylim()[1]
        assert any(png.near(ax.transData, 0.3, y, "#555555", radius=1) for y in np.linspace(0, top, 25)[1:-1]), \
            "the phase change at 0.3 s"
        rows = band.get_ylim()[1]
        for row, states in enumerate(reversed([[s for s in trace.of(CongestionState) if not s.inferred],
                                               list(inferred)])):
            ordered = sorted(states, key=lambda s: s.t_us)
            end = max(e.t_us for e in trace.events)
            for s, nxt in zip(ordered, ordered[1:] + [None]):
                t0, t1 = s.t_us, nxt.t_us if nxt else end
                if (t1 - t0) / end > 0.02:  # wide enough to hold a pixel
                    assert png.near(band.transData, (t0 + t1) / 2e6, row + 0.5, STATE_COLOURS[s.state]), \
                        f"{s.state} in the {'logged' if row == rows - 1 else 'inferred'} band"
    finally:
        plt.close(fig)
    plain = plot_cwnd(trace, out_png=tmp_path / "plain.png", inferred=inferred)
    fig = cwnd_figure(trace, inferred=inferred)
    try:
        edge = fig.axes[0].get_xaxis_transform()
        assert not _Png(plain, fig).near(edge, 0.15, 0.985, DROP_COLOURS["queue_full"]), "no link, no drop marks"
    finally:
        plt.close(fig)


def test_plot_takes_the_ground_truth_path_and_explicit_phases(tmp_path):
    gt = ground_truth()
    log = tmp_path / "link.ndjson"
    lines = [gt.header] + [r.__dict__ | {"marks": list(r.marks)} for r in gt.records]
    log.write_text("".join(json.dumps(v) + "\n" for v in lines))
    out = plot_cwnd(simulate(100), log, [100_000.0, {"start_us": 200_000}], out_png=tmp_path / "sub" / "p.png")
    assert_png(out)


def test_plot_without_a_window_says_so(tmp_path):
    trace = Trace("x", "server", [Metrics(0, bytes_in_flight=10)], "file.qlog")
    with pytest.raises(ValueError, match="file.qlog: no congestion_window"):
        plot_cwnd(trace, out_png=tmp_path / "x.png")


def states(*pairs) -> list[CongestionState]:
    return [CongestionState(t, s, inferred=True) for t, s in pairs]


RUN = states((0, "SlowStart"), (10, "Recovery"), (20, "CongestionAvoidance"), (25, "CongestionAvoidance"),
             (30, "Recovery"), (40, "CongestionAvoidance"), (50, "TailLossProbe"), (60, "CongestionAvoidance"))


def test_visits_count_entries_transitions_and_time():
    v = count_visits(RUN, end_us=100)
    assert v.entries == {"SlowStart": 1, "Recovery": 2, "CongestionAvoidance": 3, "TailLossProbe": 1}
    assert v.transitions[("Init", "SlowStart")] == 1
    assert v.transitions[("Recovery", "CongestionAvoidance")] == 2
    assert v.transitions[("CongestionAvoidance", "Recovery")] == 1
    assert ("CongestionAvoidance", "CongestionAvoidance") not in v.transitions, "a re-logged state is no visit"
    assert v.time_us["CongestionAvoidance"] == 10 + 10 + 40
    assert count_visits(RUN).time_us.get("CongestionAvoidance") == 20, "the last visit is open without an end"


def test_dot_names_the_states_and_counts():
    dot = to_dot(RUN, end_us=100, title="sim")
    for name in ("SlowStart", "Recovery", "CongestionAvoidance", "TailLossProbe", "Init"):
        assert name in dot
    assert "RetransmissionTimeout" not in dot, "only visited states are drawn"
    assert "CongestionAvoidance\\n3 visits" in dot and "Recovery\\n2 visits" in dot
    assert "Recovery -> CongestionAvoidance [label=2" in dot
    assert "Init -> SlowStart [label=1" in dot


def test_state_diagram_writes_dot_and_png(tmp_path):
    dot_path, png_path = state_diagram(RUN, tmp_path / "d", name="run", end_us=100)
    assert dot_path.read_text().startswith("digraph")
    assert_png(png_path, min_width=300, min_height=60)


def test_missing_dot_executable_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` there
    with pytest.raises(DiagramError, match="apt-get install graphviz"):
        state_diagram(RUN, tmp_path, name="run")
    assert (tmp_path / "run.dot").exists(), "the DOT text is written even when rendering fails"


def test_write_report_on_a_real_trace(tmp_path):
    """The whole report of one fixture run (qlog reader, ground truth, plot, diagrams)."""
    qlog = pytest.importorskip("harness.observe.qlog", reason="the qlog reader is not there yet")
    run = FIXTURES / "quic-go" / "newreno"
    if not (run / "link.ndjson").exists():
        pytest.skip(f"no fixture run at {run}")
    trace = qlog.read_run(run, "quic-go")["server"][0]
    paths = write_report(trace, tmp_path, beta=0.7, mss=1252, ground_truth=run / "link.ndjson")
    assert set(paths) == {"plot", "inferred_dot", "inferred_png", "logged_dot", "logged_png"}
    assert_png(paths["plot"])
    assert "Recovery" in paths["inferred_dot"].read_text() and "Recovery" in paths["logged_dot"].read_text()
