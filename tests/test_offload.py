"""LL_OFFLOAD=off (docs/endpoints.md) really switches a stack's send offload off.

Every endpoint whose caps.json declares `honours.offload` runs a 2 MB transfer over
127.0.0.1 twice with its server under strace: as it comes, some of its sends carry
a UDP_SEGMENT control message (GSO: one call, many datagrams); with LL_OFFLOAD=off,
none does and the transfer is still verified. A value other than on/off is
refused with exit 127. zhang-1gbit's "-no-offload" column rests on this switch
(docs/reproductions.md), so an endpoint that declared it and ignored the variable
would fail here rather than print a column equal to the other.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from rust_endpoints import RUN_TIMEOUT_S, ENDPOINTS, Pair, free_udp_port, run_alone, sha256, start_server

#: The cmsg type strace prints for UDP_SEGMENT (103) on a send: its name or its number.
SEGMENT_CMSG = ("cmsg_level=SOL_UDP, cmsg_type=UDP_SEGMENT", "cmsg_level=SOL_UDP, cmsg_type=0x67")


def _declaring() -> list[str]:
    return sorted(p.parent.name for p in ENDPOINTS.glob("*/caps.json")
                  if json.loads(p.read_text()).get("honours", {}).get("offload"))


def _built(stack: str) -> Path:
    caps = json.loads((ENDPOINTS / stack / "caps.json").read_text())
    artifact = ENDPOINTS / stack / caps.get("artifact", "run")
    if not artifact.exists():
        pytest.skip(f"{stack} endpoint not built ({artifact} missing): run `make setup`")
    return ENDPOINTS / stack / "run"


def _segmented_sends(stack: str, root: Path, extra: dict[str, str]) -> int:
    """Sends of the server that carried UDP_SEGMENT, over a verified 2 MB transfer.
    strace starts the server as its own child (tracing a child needs no privilege),
    and the stop signal goes to that child, the server, not to strace."""
    run = _built(stack)
    if not shutil.which("strace"):
        pytest.fail("strace is missing: `make setup` installs it (scripts/install-system-deps.sh)")
    root.mkdir(parents=True)
    pair = Pair(root)
    pair.add_file("offload.bin", 2_000_000)
    port = free_udp_port()
    common = {"TESTCASE": "transfer", **extra}
    trace = root / "strace.txt"
    traced = root / "server-under-strace.sh"
    traced.write_text(f"#!/bin/sh\nexec strace -f -qq -o {trace} -e trace=sendmsg,sendmmsg,sendto {run}\n")
    traced.chmod(0o755)
    tracer = start_server(traced, pair.server.env({**common, "LL_ADDR": "127.0.0.1", "LL_PORT": str(port),
                                                   "LL_WWW": str(pair.www), "LL_CERTS": str(root / "certs")}))
    server = int(Path(f"/proc/{tracer.pid}/task/{tracer.pid}/children").read_text().split()[0])
    try:
        env = pair.client.env({**common, "REQUESTS": f"https://127.0.0.1:{port}/offload.bin",
                               "LL_DOWNLOADS": str(pair.downloads)})
        client = subprocess.run([str(run)], env={**os.environ, **env}, capture_output=True, text=True,
                                timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
        assert client.returncode == 0, client.stderr
    finally:
        os.kill(server, signal.SIGTERM)
        try:
            tracer.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(server, signal.SIGKILL)
            tracer.kill()
            tracer.communicate()
    assert sha256(pair.downloads / "offload.bin") == sha256(pair.files["offload.bin"])
    text = trace.read_text()
    assert "send" in text, f"strace saw no sends of the {stack} server"
    return sum(text.count(c) for c in SEGMENT_CMSG)


def test_the_stacks_that_declare_the_switch():
    # The zhang-1gbit notes and docs/reproductions.md name these; a new one is named there too.
    assert _declaring() == ["quic-go", "quinn", "s2n-quic"]


@pytest.mark.parametrize("stack", _declaring())
def test_offload_off_sends_one_datagram_per_buffer(stack, tmp_path):
    assert _segmented_sends(stack, tmp_path / "on", {}) > 0, f"{stack} used no GSO even as it comes"
    assert _segmented_sends(stack, tmp_path / "off", {"LL_OFFLOAD": "off"}) == 0


@pytest.mark.parametrize("stack", _declaring())
def test_an_unknown_offload_value_is_refused(stack, tmp_path):
    run = _built(stack)
    env = {"ROLE": "server", "LL_PORT": str(free_udp_port()), "LL_ADDR": "127.0.0.1", "LL_CERTS": str(tmp_path),
           "TESTCASE": "transfer", "LL_OFFLOAD": "sideways"}
    proc = run_alone(run, env)
    assert proc.returncode == 127, proc.stderr
    assert "LL_OFFLOAD" in proc.stderr
