"""Held acknowledgements (TransferPlan.ack_hold_ms, LL_ACK_HOLD_MS): a receiver that
acknowledges later than the max_ack_delay it declares, so that RFC 9002 §5.3's cap on
the ACK Delay a sender subtracts has something to act on. Fast: no namespaces; one
virtual-time transfer of 200 kB (under a second)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness.endpoints import load
from harness.endpoints.aioquic.ack_hold import MAX_HOLD_MS, hold_acks
from harness.run import Example, Target, run_example
from harness.schedule import LinkSettings, Schedule, TransferPlan
from harness.testbed.contract import EndpointOptions, contract_env, unhonoured

SCHEDULE = Schedule.constant(0, LinkSettings(rate_bps=20_000_000, delay_us=20_000))
PLAN = TransferPlan(sizes=(200_000,))


def test_the_hold_sets_aioquics_ack_timer_and_refuses_what_it_cannot_hold():
    conn = type("Conn", (), {"_ack_delay": 0.001})()
    hold_acks(conn, 60)
    assert conn._ack_delay == 0.060
    for bad in (0, -5, MAX_HOLD_MS + 1):
        with pytest.raises(ValueError, match="between 1 and"):
            hold_acks(conn, bad)
    with pytest.raises(ValueError, match="_ack_delay"):
        hold_acks(object(), 60)


def test_only_a_receiver_that_declares_the_hold_is_given_it():
    held = EndpointOptions(ack_hold_ms=60)
    assert contract_env(held, PLAN)["LL_ACK_HOLD_MS"] == "60"
    assert "LL_ACK_HOLD_MS" not in contract_env(EndpointOptions(), PLAN)
    aioquic, quinn = load("aioquic"), load("quinn")
    assert unhonoured(aioquic, held) is None
    assert "honours.ack_hold" in unhonoured(quinn, held)
    # The receiver decides, not the sender: quinn sending to an aioquic client may
    # hold; aioquic sending to a quinn client may not.
    assert unhonoured(quinn, held, receiver=aioquic) is None
    assert "quinn" in unhonoured(aioquic, held, receiver=quinn)
    assert Target(quinn, quinn.cc["newreno"], peer=aioquic).receiver is aioquic
    assert Target(quinn, quinn.cc["newreno"]).receiver is quinn


def test_an_example_keeps_its_hold_and_the_receiver_reports_delays_past_its_max_ack_delay(tmp_path):
    """The hold survives the example's JSON (a replay holds too), and an aioquic
    client given it acknowledges the server's data with ACK Delays above the 25 ms it
    declares, where without it every delay stays within a few ms."""
    e = Example("n", "aioquic", "newreno", SCHEDULE, replace(PLAN, ack_hold_ms=60), 30.0, "virtual")
    again = Example.from_json(json.loads(json.dumps(e.to_json())))
    assert again.plan.ack_hold_ms == 60
    assert "ack_hold_ms" not in Example("n", "aioquic", "newreno", SCHEDULE, PLAN, 30.0).to_json()["plan"]
    aioquic = load("aioquic")
    delays = {}
    for hold in (0, 60):
        out = tmp_path / str(hold)
        example = Example("n", "aioquic", "newreno", SCHEDULE, replace(PLAN, ack_hold_ms=hold), 30.0, "virtual")
        assert run_example(example, Target(aioquic, aioquic.cc["newreno"]), out).ok
        text = next((out / "server" / "qlog").glob("*.qlog")).read_text()
        delays[hold] = [float(x) for x in _ack_delays(text)]
    assert delays[0] and max(delays[0]) < 25, delays[0]
    assert max(delays[60]) > 25, delays[60]


def _ack_delays(qlog_text: str) -> list[str]:
    """The ack_delay (ms) of every ACK frame the server's qlog shows it receiving."""
    import re

    return re.findall(r'"ack_delay": ?([0-9.]+)', qlog_text)
