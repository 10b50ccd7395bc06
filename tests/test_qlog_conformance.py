"""qlog conformance checks: what each stack's real qlog is known to deviate on, and the
checks themselves on small synthetic files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.observe import conformance

FIXTURES = Path(__file__).parent / "fixtures" / "qlog"

#: (stack, cc) → the check names its fixture triggers (client ∪ server). Each is a
#: documented deviation (docs/trace.md), so a change here is a change in a stack.
KNOWN = {
    ("aioquic", "newreno"): {"metric_names", "packet_lost_fields", "packet_lost_trigger"},
    ("aioquic", "cubic"): {"metric_names", "packet_lost_fields", "packet_lost_trigger"},
    ("picoquic", "newreno"): {"format", "reference_time", "time_monotonic", "packet_type_placement",
                              "metric_names", "packet_lost_trigger", "congestion_state"},
    ("quic-go", "newreno"): {"event_names"},
    ("quiche", "cubic"): {"packet_lost_missing", "ssthresh_sentinel"},
    ("quinn", "cubic"): {"vantage_point", "reference_time", "frames", "ssthresh_sentinel", "rtt_units"},
    ("tquic", "cubic"): {"reference_time", "packet_lost_trigger"},
    ("s2n-quic", "cubic"): {"packet_lost_trigger"},
    ("ngtcp2", "cubic"): {"packet_lost_trigger"},
}


@pytest.mark.parametrize("stack,cc", sorted(KNOWN), ids=lambda x: x)
def test_fixture_deviations_are_the_known_ones(stack, cc):
    findings = conformance.check_run(FIXTURES / stack / cc, stack)
    assert all(f.stack == stack and f.message and f.source for f in findings)
    assert {f.check for f in findings} == KNOWN[(stack, cc)], [(f.check, f.message) for f in findings]


def test_specific_messages():
    quinn = conformance.check_run(FIXTURES / "quinn" / "cubic", "quinn")
    rtt = [f for f in quinn if f.check == "rtt_units"]
    assert len(rtt) == 2 and all("seconds" in f.message for f in rtt)
    pico = conformance.check_run(FIXTURES / "picoquic" / "newreno", "picoquic")
    assert any(f.check == "packet_lost_trigger" and "repeat" in f.message for f in pico)
    quiche = conformance.check_run(FIXTURES / "quiche" / "cubic", "quiche")
    assert any(f.check == "packet_lost_missing" and "2 lost" in f.message for f in quiche)


def test_link_rtt_from_header():
    assert conformance.link_rtt_us(FIXTURES / "quic-go" / "newreno" / "link.ndjson") == 40_000
    assert conformance.link_rtt_us(FIXTURES / "nowhere.ndjson") is None


# ------------------------------------------------------------------ synthetic files


def _seq(tmp_path: Path, events: list[dict], header: dict | None = None) -> Path:
    header = header or {"qlog_version": "0.3", "qlog_format": "JSON-SEQ",
                        "trace": {"vantage_point": {"type": "server"},
                                  "common_fields": {"reference_time": 1_700_000_000_000.0}}}
    p = tmp_path / "t.sqlog"
    p.write_bytes(b"".join(b"\x1e" + json.dumps(r).encode() + b"\n" for r in [header] + events))
    return p


def _metrics(t: float, **data) -> dict:
    return {"time": t, "name": "recovery:metrics_updated", "data": data}


def _checks(path: Path, rtt_us: float | None = 40_000) -> dict[str, str]:
    return {f.check: f.message for f in conformance.check_file(path, "x", rtt_us)}


def test_clean_file_has_no_findings(tmp_path):
    p = _seq(tmp_path, [
        {"time": 0.5, "name": "transport:packet_sent",
         "data": {"header": {"packet_type": "1RTT", "packet_number": 0}, "frames": [{"frame_type": "ping"}]}},
        _metrics(1.0, congestion_window=12000, smoothed_rtt=41.0, latest_rtt=40.5, pacing_rate=3_000_000),
        {"time": 2.0, "name": "recovery:packet_lost",
         "data": {"header": {"packet_type": "1RTT", "packet_number": 0}, "trigger": "time_threshold"}},
    ])
    assert _checks(p) == {}


def test_rtt_in_seconds_and_microseconds(tmp_path):
    assert "seconds" in _checks(_seq(tmp_path, [_metrics(1, congestion_window=1, latest_rtt=0.041)]))["rtt_units"]
    assert "µs" in _checks(_seq(tmp_path, [_metrics(1, congestion_window=1, latest_rtt=41000)]))["rtt_units"]
    assert "rtt_units" not in _checks(_seq(tmp_path, [_metrics(1, congestion_window=1, latest_rtt=0.041)]), None)


def test_pacing_in_bytes_negative_values_and_time_order(tmp_path):
    found = _checks(_seq(tmp_path, [
        _metrics(5, congestion_window=40000, smoothed_rtt=40.0, pacing_rate=1_000_000),
        _metrics(4, congestion_window=40000, bytes_in_flight=-3, ssthresh=2**64 - 1),
    ]))
    assert {"pacing_units", "non_negative", "time_monotonic", "ssthresh_sentinel"} <= set(found)
    assert "bytes_in_flight" in found["non_negative"]


def test_impossible_reordering_trigger(tmp_path):
    sent = [{"time": i, "name": "transport:packet_sent",
             "data": {"header": {"packet_type": "1RTT", "packet_number": i}, "frames": [{"frame_type": "ping"}]}}
            for i in range(5)]
    lost = {"time": 9, "name": "recovery:packet_lost",
            "data": {"header": {"packet_type": "1RTT", "packet_number": 3}, "trigger": "reordering_threshold"}}
    assert "cannot be right" in _checks(_seq(tmp_path, sent + [lost]))["packet_lost_trigger"]


def test_unreadable_file_is_one_finding(tmp_path):
    p = tmp_path / "junk.qlog"
    p.write_bytes(b"\x00junk")
    (f,) = conformance.check_file(p, "aioquic")
    assert f.check == "readable" and "junk.qlog" in f.message


def test_truncated_file_is_flagged_incomplete(tmp_path):
    src = next((FIXTURES / "quic-go" / "newreno" / "server" / "qlog").glob("*")).read_bytes()
    p = tmp_path / "cut.sqlog"
    p.write_bytes(src[: len(src) // 2 - 7])
    found = _checks(p)
    assert "complete" in found and "cut.sqlog" in found["complete"]
