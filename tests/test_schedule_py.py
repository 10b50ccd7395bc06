"""Unit tests of the Python schedule builder and the ground-truth log parser (no root)."""

import json

import pytest

from harness.observe.groundtruth import DROP_REASONS, FATES, LogFormatError, PacketRecord, read_log
from harness.schedule import (
    Action,
    FlowSelector,
    GilbertElliottLoss,
    IidLoss,
    LinkSettings,
    Phase,
    Schedule,
)

# The example schedule of docs/emulator.md, as the emulator reads it.
DOC_EXAMPLE = {
    "seed": 7,
    "phases": [
        {"start_us": 0,
         "c2s": {"rate_bps": 50000000, "delay_us": 20000, "queue_bytes": 250000},
         "s2c": {"rate_bps": 50000000, "delay_us": 20000, "queue_bytes": 250000,
                 "loss": {"iid": 0.01}}},
        {"start_us": 5000000,
         "c2s": {"rate_bps": 50000000, "delay_us": 20000, "queue_bytes": 250000},
         "s2c": {"rate_bps": 5000000, "delay_us": 20000, "queue_bytes": 250000}},
    ],
    "actions": [
        {"dir": "s2c", "index": 17, "action": "drop"},
        {"dir": "s2c", "flow": {"proto": "udp", "port": 443}, "index": 40,
         "action": "hold", "k": 3},
        {"dir": "c2s", "index": 5, "action": "delay", "extra_us": 30000},
    ],
}


def doc_example_built() -> Schedule:
    """The same schedule built with the dataclasses."""
    fast = LinkSettings(rate_bps=50_000_000, delay_us=20_000, queue_bytes=250_000)
    return Schedule(
        seed=7,
        phases=[
            Phase(0, c2s=fast, s2c=LinkSettings(rate_bps=50_000_000, delay_us=20_000,
                                                queue_bytes=250_000, loss=IidLoss(0.01))),
            Phase(5_000_000, c2s=fast, s2c=LinkSettings(rate_bps=5_000_000, delay_us=20_000,
                                                        queue_bytes=250_000)),
        ],
        actions=[
            Action("s2c", 17, "drop"),
            Action("s2c", 40, "hold", flow=FlowSelector("udp", 443), k=3),
            Action("c2s", 5, "delay", extra_us=30_000),
        ],
    )


def test_builder_matches_documented_json():
    assert doc_example_built().to_json() == DOC_EXAMPLE


def test_round_trip_through_json_text():
    built = doc_example_built()
    assert Schedule.from_json(json.loads(built.dumps())) == built


def test_omitted_fields_are_absent_not_null():
    assert LinkSettings().to_json() == {}
    assert Schedule(seed=0).to_json() == {"seed": 0, "phases": [{"start_us": 0, "c2s": {}, "s2c": {}}]}


def test_gilbert_elliott_loss_json():
    loss = GilbertElliottLoss(p_good_bad=0.01, p_bad_good=0.3, loss_good=0.0, loss_bad=0.5)
    settings = LinkSettings(loss=loss)
    assert settings.to_json() == {"loss": {"gilbert_elliott": {
        "p_good_bad": 0.01, "p_bad_good": 0.3, "loss_good": 0.0, "loss_bad": 0.5}}}
    assert LinkSettings.from_json(settings.to_json()) == settings


def test_schedule_is_frozen_and_hashable():
    schedule = Schedule.constant(3, LinkSettings(delay_us=10))
    with pytest.raises(AttributeError):
        schedule.seed = 4
    assert hash(schedule) == hash(Schedule.constant(3, LinkSettings(delay_us=10)))


@pytest.mark.parametrize("kwargs, words", [
    ({"dir": "up", "index": 0, "action": "drop"}, "dir"),
    ({"dir": "c2s", "index": 0, "action": "explode"}, "action"),
    ({"dir": "c2s", "index": 0, "action": "hold"}, "k="),
    ({"dir": "c2s", "index": 0, "action": "delay"}, "extra_us="),
])
def test_action_misuse_says_what_to_fix(kwargs, words):
    with pytest.raises(ValueError, match=words):
        Action(**kwargs)


def test_unknown_link_setting_rejected():
    with pytest.raises(ValueError, match="bandwidth"):
        LinkSettings.from_json({"bandwidth": 5})


def test_write_creates_file(tmp_path):
    path = doc_example_built().write(tmp_path / "s.json")
    assert json.loads(path.read_text()) == DOC_EXAMPLE


HEADER = {"longlook_link": "0.1.0", "schedule": DOC_EXAMPLE, "seed": 7,
          "argv": ["longlook-link", "run"], "start_unix_ns": 1}
DROPPED = {"dir": "s2c", "idx": 17, "fidx": 12, "flow": "udp 198.19.0.1:443>198.18.0.1:40000",
           "proto": "udp", "sport": 443, "dport": 40000, "size": 1252, "arr_us": 512345,
           "fate": "dropped", "reason": "loss_index", "dep_us": None, "qbytes": 0}
DELIVERED = dict(DROPPED, idx=18, fidx=13, fate="delivered", reason=None, dep_us=532345,
                 marks=["held", "ce"])


def write_log(path, lines):
    """Write ``lines`` as NDJSON to ``path``."""
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_read_log_parses_header_records_summary(tmp_path):
    summary = {"c2s": {"delivered": 0}, "s2c": {"delivered": 1, "dropped": {"loss_index": 1}}}
    log = read_log(write_log(tmp_path / "l.ndjson", [HEADER, DROPPED, DELIVERED, {"summary": summary}]))
    header, records, parsed_summary = log
    assert header == HEADER
    assert parsed_summary == summary
    assert records[0] == PacketRecord(**DROPPED)
    assert records[1].marks == ("held", "ce")
    assert records[0].marks == ()
    assert records[0].fate in FATES and records[0].reason in DROP_REASONS


def test_read_log_without_summary_is_accepted(tmp_path):
    log = read_log(write_log(tmp_path / "l.ndjson", [HEADER, DROPPED]))
    assert log.summary is None and len(log.records) == 1


def test_select_by_flow(tmp_path):
    other = dict(DROPPED, proto="tcp", flow="tcp 198.19.0.1:80>198.18.0.1:5", sport=80, dport=5)
    log = read_log(write_log(tmp_path / "l.ndjson", [HEADER, DELIVERED, DROPPED, other]))
    assert [r.fidx for r in log.select("s2c", "udp", 443)] == [12, 13]
    assert log.select("c2s") == []


@pytest.mark.parametrize("lines, words", [
    ([DROPPED], "header"),
    ([HEADER, dict(DROPPED, colour="red")], "colour"),
    ([HEADER, {k: v for k, v in DROPPED.items() if k != "qbytes"}], "qbytes"),
])
def test_read_log_names_file_line_and_problem(tmp_path, lines, words):
    path = write_log(tmp_path / "bad.ndjson", lines)
    with pytest.raises(LogFormatError, match=words) as info:
        read_log(path)
    assert str(path) in str(info.value)


def test_read_log_rejects_non_json(tmp_path):
    path = tmp_path / "bad.ndjson"
    path.write_text(json.dumps(HEADER) + "\n{not json\n")
    with pytest.raises(LogFormatError, match=r"bad.ndjson:2"):
        read_log(path)


def test_the_client_first_flight_schedule_drops_its_first_two_quic_datagrams():
    from harness.schedule import handshake, strategies

    s = handshake.client_first_flight_lost(strategies.BaseLink(), 3)
    assert [(a.dir, a.index, a.action, a.flow.proto) for a in s.actions] == [("c2s", 0, "drop", "udp"),
                                                                            ("c2s", 1, "drop", "udp")]
    assert s.phases[0].c2s.loss is None and s.phases[0].s2c.blackhole is None


def test_the_lost_handshake_done_drops_the_receivers_datagrams_from_its_second():
    """An upload's receiver (the QUIC server) sends c2s: its second datagram carries
    HANDSHAKE_DONE, its fourth the probe resending it; only those are dropped, on an
    otherwise clean link."""
    from hypothesis import given, settings

    from harness.schedule import handshake, strategies

    s = handshake.handshake_done_lost(strategies.BaseLink(rtt_us=20_000), 0, 1, 2)
    assert [(a.dir, a.index, a.action, a.flow.proto) for a in s.actions] == [("c2s", 1, "drop", "udp"),
                                                                            ("c2s", 3, "drop", "udp")]
    assert [a.index for a in handshake.handshake_done_lost(strategies.BaseLink(), 0, 2).actions] == [2]
    assert s.phases[0].c2s.delay_us == 10_000 and s.phases[0].s2c.loss is None

    @settings(max_examples=20, database=None)
    @given(handshake.handshake_done_losses())
    def drawn(s):
        assert {a.index for a in s.actions} <= {1, 2, 3, 4, 5} and all(a.dir == "c2s" for a in s.actions)

    drawn()


def test_the_server_dark_handshake_drops_the_server_direction_from_the_start_then_clears():
    from harness.schedule import handshake, strategies

    s = handshake.server_dark_from_start(strategies.BaseLink(rtt_us=10_000), 7, 1_500)
    assert [(p.start_us, p.c2s.blackhole, p.s2c.blackhole) for p in s.phases] == [(0, None, True),
                                                                                  (1_500_000, None, None)]
    assert s.phases[0].s2c.delay_us == 5_000 and not s.actions


def test_the_late_spurious_loss_delays_one_datagram_on_a_queue_that_deepens():
    """RFC 9438 §4.9.2's schedule: a six-datagram queue slow start overflows, a queue
    nothing fills from the deepening on, and one datagram of the data direction delayed."""
    from harness.schedule import strategies

    s = strategies.late_spurious_loss(strategies.BaseLink(rate_bps=2_000_000, rtt_us=10_000), 0, 200, 120, 300)
    assert [p.start_us for p in s.phases] == [0, 200_000]
    assert s.phases[0].s2c.queue_bytes == 6 * strategies.MTU
    assert s.phases[1].s2c.queue_bytes == strategies.LOSSLESS_QUEUE_BYTES
    assert [(a.dir, a.index, a.action, a.extra_us) for a in s.actions] == [("s2c", 120, "delay", 300_000)]


def test_the_rising_delay_after_an_outage_outruns_hystart_thresholds_every_round():
    """RFC 9406 §4.3's schedule: after the outage the round trip grows, every round, by
    more than HyStart++'s RttThresh (an eighth of it, between 4 and 16 ms), and never
    shrinks (a shorter path would reorder)."""
    from harness.schedule import strategies

    base = strategies.BaseLink(rate_bps=30_000_000, rtt_us=80_000)
    s = strategies.dark_then_rising_delay(base, 0, 1200, 1200, 4500)
    assert s.phases[1].s2c.blackhole and s.phases[2].start_us == 2_400_000
    ramp = [(p.start_us, 2 * p.s2c.delay_us) for p in s.phases[2:]]
    assert all(b[1] >= a[1] for a, b in zip(ramp, ramp[1:]))
    for (t0, rtt0), (t1, rtt1) in zip(ramp, ramp[1:]):
        per_round = (rtt1 - rtt0) / (t1 - t0) * rtt0  # µs the round trip grows in one round trip
        assert per_round > max(4_000, min(rtt0 / 8, 16_000)), (t0, rtt0, per_round)
    assert ramp[-1][0] - ramp[0][0] >= 4_400_000


def test_the_first_object_late_delays_then_darkens_the_data_direction_until_its_datagrams_are_in():
    """RFC 9002 §6.2.4's schedule: what leaves one to two RTTs in is late, the data
    direction is dark from two RTTs until those late datagrams are in and `dark_ms`
    after, then clean, so nothing overtakes them."""
    from harness.schedule import strategies

    s = strategies.first_object_late(strategies.BaseLink(rtt_us=40_000), 0, 300, 1000)
    assert [(p.start_us, p.s2c.delay_us, p.s2c.blackhole) for p in s.phases] == [
        (0, 20_000, None), (40_000, 320_000, None), (80_000, 20_000, True), (1_380_000, 20_000, None)]
    assert all(p.c2s.delay_us == 20_000 and not p.c2s.blackhole for p in s.phases)
