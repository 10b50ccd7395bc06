"""Events a stack's log lacks, derived from the decrypted capture (issue 17 part 5):
quinn's ACK frames and quiche's losses, so trace validation judges them instead of
skipping. On a real quinn run (tests/fixtures/wire/quinn: 2% loss, real time) and
on fabricated traces for the ordering rules."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from harness.model import validate
from harness.observe.derive import DeriveError, _merge, fill_from_wire
from harness.observe.events import Metrics, PacketAcked, PacketLost, PacketSent, Trace
from harness.observe.groundtruth import read_log
from harness.observe.qlog import read_trace
from test_wire_decode import FIXTURES, load


@pytest.fixture(scope="module")
def quinn(tmp_path_factory):
    d = FIXTURES / "quinn"
    qlog = tmp_path_factory.mktemp("quinn") / "server.sqlog"
    qlog.write_bytes(gzip.decompress((d / "server.sqlog.gz").read_bytes()))
    return read_trace(qlog, "quinn", "server", read_log(d / "link.ndjson").header["start_unix_ns"]), load("quinn")


def test_quinn_gets_its_acknowledgements_from_the_capture(quinn):
    trace, view = quinn
    assert not trace.of(PacketAcked)
    filled = fill_from_wire(trace, view, {"ack_frames"})
    acked = filled.of(PacketAcked)
    sent = {(e.space, e.pn) for e in trace.of(PacketSent)}
    assert len(acked) > 100 and all((a.space, a.pn) in sent for a in acked)
    assert filled.derived == {"ack_frames"} and "derived from the capture: ack_frames" in filled.notes[-1]
    assert [e for e in filled.events if not isinstance(e, PacketAcked)] == trace.events  # nothing else moves
    # Every acknowledgement comes after the send it acknowledges.
    seen = set()
    for e in filled.events:
        if isinstance(e, PacketSent):
            seen.add((e.space, e.pn))
        elif isinstance(e, PacketAcked):
            assert (e.space, e.pn) in seen, e


def test_capabilities_the_log_has_are_never_derived(quinn):
    trace, view = quinn
    assert fill_from_wire(trace, view, {"smoothed_rtt"}) is trace
    filled = fill_from_wire(trace, view, {"ack_frames"})
    assert fill_from_wire(filled, view, {"ack_frames"}) is filled


@pytest.mark.slow
def test_a_real_quinn_run_is_validated_with_derived_acknowledgements(quinn):
    trace, view = quinn
    verdict = validate.validate(fill_from_wire(trace, view, {"ack_frames"}), "cubic")
    assert verdict.accepted, verdict.describe()


def test_derived_events_take_their_place_at_an_instant():
    logged = [PacketSent(0.0, 1), PacketSent(0.0, 2), PacketSent(0.0, 3), PacketSent(0.0, 4),
              PacketAcked(100.0, 4), Metrics(100.0, congestion_window=9000), Metrics(200.0, congestion_window=9100)]
    derived = [PacketLost(100.4, 1), PacketAcked(199.6, 2)]
    out = _merge(logged, derived, slack=1.0)
    # The loss after the logged ACK that revealed it, before the window it caused;
    # the derived ACK before the window logged at its instant.
    assert out.index(derived[0]) == out.index(logged[4]) + 1 < out.index(logged[5])
    assert out.index(derived[1]) == out.index(logged[6]) - 1


def test_a_capture_of_another_connection_is_refused(quinn):
    trace, view = quinn
    stranger = Trace("quinn", "server", [PacketSent(0.0, 10**6, "application", 1200)], "x.sqlog")
    with pytest.raises(DeriveError, match="no packet both in the log and in the capture"):
        fill_from_wire(stranger, view, {"ack_frames"})


def test_a_loss_by_the_time_threshold_is_presumed_when_the_loss_timer_fires():
    """RFC 9002 §6.1.2: a packet below the largest acknowledged that its ACK did not yet
    find lost is declared when its time threshold runs out, by the loss timer, with no
    ACK arriving then; a stack without loss events (quiche) cuts its window at that
    instant, so the presumed loss must come then, not at the next ACK."""
    from types import SimpleNamespace as NS

    from harness.observe.join import _Flight

    def sent(t, pn):
        return NS(direction="s2c", t_us=t, packets=[NS(pn=pn, space="application", size=1200, ack_eliciting=True,
                                                       frames=[])])

    def ack(t, ranges, largest):
        frame = NS(name="ack", ranges=ranges, largest=largest, delay_us=lambda exponent: 0.0)
        return NS(direction="c2s", t_us=t, packets=[NS(pn=None, space="application", frames=[frame])])

    f = _Flight("s2c", {"c2s": 3, "s2c": 3}, losses=True)
    for d in (sent(0, 0), sent(1000, 1), sent(2000, 2), sent(3000, 3), ack(40_000, [(3, 3), (0, 1)], 3),
              sent(100_000, 4)):
        f.on_datagram(d)
    (lost,) = [e for e in f.events if isinstance(e, PacketLost)]
    # One RTT sample, 37 ms: the threshold is 9/8 of it after packet 2 left.
    assert (lost.pn, lost.trigger) == (2, "time_threshold") and lost.t_us == pytest.approx(2000 + 9 / 8 * 37_000)
    later = f.events.index(next(e for e in f.events if isinstance(e, PacketSent) and e.pn == 4))
    assert f.events.index(lost) < later
