"""The endpoint contract without Docker (harness/testbed/commands.py, docs/docker.md): an
interop-runner–style program run as a local command inside the namespaces.

The command under test is tests/endpoints/qir-aioquic.sh: our aioquic endpoint
behind docker/run_endpoint.sh, as an implementer's run_endpoint.sh would be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import endpoints
from harness.testbed import netns
from harness.testbed.commands import parse, with_command
from harness.endpoints import StackError
from harness.schedule import Action, LinkSettings, Phase, Schedule
from harness.testbed.topology import QIR_PORT, SERVER_IP, EndpointOptions, Testbed, TransferPlan

ROOT = Path(__file__).resolve().parent.parent
WRAPPER = "tests/endpoints/qir-aioquic.sh"


def _schedule(actions: tuple = ()) -> Schedule:
    link = LinkSettings(rate_bps=20_000_000, delay_us=10_000, queue_bytes=400_000)
    return Schedule(seed=5, phases=(Phase(start_us=0, c2s=link, s2c=link),), actions=actions)


def _ours_left() -> list[str]:
    return [n for n in netns.list_ours() if netns.owner_pid(n) == os.getpid()]


@pytest.mark.parametrize("text, needle", [
    ("", "the command is empty"),
    ("'unbalanced", "check its quotes"),
    ("no-such-program-ll", "'no-such-program-ll' is not on PATH"),
    ("./no/such/file", "does not exist"),
    ("README.md", "is not on PATH"),
    ("./README.md", "is not an executable file"),
])
def test_bad_commands_are_named(text, needle, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(StackError, match="--impl-cmd") as e:
        with_command(endpoints.load("aioquic"), text)
    assert needle in str(e.value)


def test_program_is_made_absolute(monkeypatch):
    """The endpoint runs in its role's directory, so a relative program must not stay relative."""
    monkeypatch.chdir(ROOT)
    argv = parse(f"{WRAPPER} --flag x", "test")
    assert argv == (str(ROOT / WRAPPER), "--flag", "x")


def test_transfer_through_a_local_command(netns_ready, tmp_path, monkeypatch):
    """The wrapped endpoint fetches the objects through the link, on the interop
    runner's port, with qlog and key logs where the harness asked for them."""
    monkeypatch.chdir(ROOT)
    stack = with_command(endpoints.load("aioquic"), WRAPPER)
    drop = Action(dir="s2c", index=20, action="drop")
    with Testbed(_schedule((drop,)), tmp_path) as bed:
        result = bed.transfer(stack, TransferPlan(sizes=(300_000, 200_000)), EndpointOptions(timeout_s=30))
    assert result.ok, result.reason
    assert result.bytes == 500_000
    packets = [r for r in map(json.loads, (tmp_path / "link.ndjson").read_text().splitlines()) if "idx" in r]
    assert any(f"{SERVER_IP}:{QIR_PORT}>" in r["flow"] for r in packets if r["dir"] == "s2c")
    assert [(r["dir"], r["idx"]) for r in packets if r["fate"] != "delivered"] == [("s2c", 20)]
    for path in ("server/keys.log", "client/keys.log", "server/app.ndjson"):
        assert (tmp_path / path).stat().st_size > 0, path
    assert list((tmp_path / "server" / "qlog").iterdir())
    assert _ours_left() == []


def test_a_client_that_fails_is_named_with_its_last_words(netns_ready, tmp_path):
    """The server serves; the client command exits 4: the reason names the client's
    command and its stderr (the path a failed transfer's reason takes)."""
    run = endpoints.load("aioquic").directory / "run"
    stack = with_command(endpoints.load("aioquic"),
                         f"sh -c 'if [ \"$ROLE\" = client ]; then echo no route >&2; exit 4; fi; exec {run}'")
    with Testbed(_schedule(), tmp_path) as bed:
        result = bed.transfer(stack, TransferPlan(sizes=(1000,)), EndpointOptions(timeout_s=10))
    assert not result.ok and not result.unsupported
    assert "client command `" in result.reason and "exited with 4" in result.reason, result.reason
    assert "no route" in result.reason, result.reason
    assert _ours_left() == []


def test_command_that_exits_at_once_is_named(netns_ready, tmp_path):
    """A broken build fails within seconds, its command and last words in the reason."""
    stack = with_command(endpoints.load("aioquic"), "sh -c 'echo missing libfoo.so >&2; exit 3'")
    started = time.monotonic()
    with Testbed(_schedule(), tmp_path) as bed:
        result = bed.transfer(stack, TransferPlan(sizes=(1000,)), EndpointOptions(timeout_s=10))
    assert not result.ok and not result.unsupported
    assert "server command `" in result.reason and "exit 3" in result.reason, result.reason
    assert "exited with 3" in result.reason and "missing libfoo.so" in result.reason, result.reason
    assert time.monotonic() - started < 10
    assert _ours_left() == []


def test_exit_127_is_unsupported(netns_ready, tmp_path):
    """docker/run_endpoint.sh answers 127 to a test case it lacks; the result is unsupported, with its reason."""
    stack = with_command(endpoints.load("aioquic"), str(ROOT / WRAPPER))
    with Testbed(_schedule(), tmp_path) as bed:
        result = bed.transfer(stack, TransferPlan(sizes=(1000,), testcase="handshake"), EndpointOptions(timeout_s=10))
    assert result.unsupported, result
    assert "test case 'handshake' not supported" in result.reason


def test_usage_errors_name_the_fix(tmp_path):
    """--impl-cmd needs one --impl and the local backend; said in one line, no traceback."""
    base = [sys.executable, "-m", "pytest", "properties/test_liveness.py", "--collect-only", "-q",
            "-p", "no:cacheprovider", "--impl-cmd", WRAPPER]
    for extra, needle in (([], "give a single --impl"), (["--impl", "aioquic,quinn"], "give a single --impl"),
                          (["--impl", "aioquic", "--backend", "docker"], "not with --backend docker"),
                          (["--impl", "aioquic", "--impl-cmd", "./nope"], "does not exist")):
        done = subprocess.run(base + extra, cwd=ROOT, capture_output=True, text=True, timeout=120)
        text = done.stdout + done.stderr
        assert done.returncode != 0 and needle in text, text[-600:]
        assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout.strip(), text[-600:]


def test_liveness_property_passes_through_a_command(netns_ready, tmp_path):
    """A property, end to end through the plugin: --impl aioquic --impl-cmd WRAPPER."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "properties/test_liveness.py::test_transfer_completes_under_loss_and_reordering",
         "--impl", "aioquic", "--cc", "newreno", "--impl-cmd", WRAPPER, "--hypothesis-profile", "ci",
         "--artifacts", str(tmp_path), "--keep-passing", "-p", "no:cacheprovider", "-q", "-rs"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    tail = (done.stdout + done.stderr)[-1500:]
    # No allowance for "inconclusive": liveness has no CPU rule, so only a wrapper
    # that wrongly answers 127 (unsupported) could make it so, the bug to catch.
    assert done.returncode == 0 and "1 passed" in tail, tail
    # Each example remembers the command, so `longlook replay` runs it again (harness/cli.py).
    saved = [json.loads(p.read_text()) for p in tmp_path.rglob("example.json")]
    assert saved and all(e["run"] == {"backend": "local", "command": [str(ROOT / WRAPPER)]} for e in saved), saved[:1]


def test_stacks_file_command_entry(monkeypatch, tmp_path):
    """An entry with "command" runs locally from any working directory; an image
    entry asks for --backend docker; a command never goes to the Docker backend."""
    from harness.testbed import docker_backend
    from harness.testbed.topology import TestbedError

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LONGLOOK_IMPL_CMD", raising=False)
    monkeypatch.setenv("LONGLOOK_BACKEND", "local")
    stack = docker_backend.load_for_run("aioquic-command")
    assert stack.command == (str(ROOT / WRAPPER),) and stack.qlog_format == endpoints.load("aioquic").qlog_format
    with pytest.raises(StackError, match="add --backend docker"):
        docker_backend.load_for_run("lsquic")
    monkeypatch.setenv("LONGLOOK_BACKEND", "docker")
    with pytest.raises(TestbedError, match="runs with --backend local"):
        docker_backend.open_testbed(_schedule(), tmp_path / "run", stack)
