"""The caddy endpoint (harness/endpoints/caddy) against docs/endpoints.md, over 127.0.0.1.

caddy is Debian's package (make setup installs it); these tests skip where it is
missing. caddy is a server that speaks only HTTP/3, so its peer is aioquic's client,
which offers h3 second and falls back to it (harness/endpoints/aioquic/h3fetch.py).
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from rust_endpoints import ENDPOINTS, Pair, applog_records, free_udp_port, run_alone, run_pair, sha256

CADDY = ENDPOINTS / "caddy" / "run"
AIOQUIC = ENDPOINTS / "aioquic" / "run"


@pytest.fixture
def caddy_installed():
    if shutil.which("caddy") is None:
        pytest.skip("caddy is not installed (make setup installs Debian's caddy)")


def test_an_aioquic_client_downloads_from_caddy_over_h3(caddy_installed, tmp_path):
    """Two objects, one connection: the bytes arrive whole, the client negotiated h3,
    caddy's app log holds the version record the clock alignment reads, and no caddy
    process is left once the wrapper stopped."""
    pair = Pair(tmp_path)
    pair.add_file("a.bin", 1_500_000)
    pair.add_file("b.bin", 300_000)
    run_pair(pair, CADDY, AIOQUIC)
    assert pair.client_rc == 0 and pair.server_rc == 0, pair.describe()
    for name, src in pair.files.items():
        assert sha256(pair.downloads / name) == sha256(src), name
    (version,) = [r for r in applog_records(pair.server.applog) if r["event"] == "version"]
    assert version["stack"] == "caddy" and version["cc"] == "newreno" and version["quic_go"] == "0.29.0"
    assert isinstance(version["t_us"], int) and isinstance(version["wall_us"], int)
    done = [r for r in applog_records(pair.client.applog) if r["event"] == "request_done"]
    assert sorted(r["bytes"] for r in done) == [300_000, 1_500_000]
    # The client's key log has the h3 connection's secrets: the run's captures decrypt with it.
    assert "CLIENT_TRAFFIC_SECRET_0" in pair.client.keylog.read_text()
    # caddy inherits the contract's environment: a process still holding this run's
    # LL_WWW is this run's caddy (others may run beside the test).
    mark = f"LL_WWW={pair.www}".encode()
    left = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in environ.read_bytes().split(b"\0"):
                left.append(environ.parent.name)
        except OSError:
            pass
    assert not left, f"caddy outlived its wrapper: pids {left}"


@pytest.mark.parametrize("env, says", [
    ({"ROLE": "client"}, "server only"),
    ({"ROLE": "server", "LL_CC": "cubic"}, "Reno"),
    ({"ROLE": "server", "LL_DIRECTION": "upload"}, "no uploads"),
    ({"ROLE": "server", "LL_INITIAL_WINDOW": "10"}, "initial window"),
])
def test_what_caddy_cannot_do_is_refused_with_exit_127(caddy_installed, tmp_path, env, says):
    proc = run_alone(CADDY, {"LL_PORT": str(free_udp_port()), "LL_ADDR": "127.0.0.1", "LL_WWW": str(tmp_path),
                             "LL_CERTS": str(tmp_path), **env})
    assert proc.returncode == 127, (proc.returncode, proc.stderr)
    assert says in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_a_caddy_that_cannot_start_says_so(caddy_installed, tmp_path):
    """A missing certificate: caddy refuses its config; the wrapper exits 1 at once
    with caddy's own error in its stderr, not after the ready timeout."""
    proc = run_alone(CADDY, {"ROLE": "server", "LL_PORT": str(free_udp_port()), "LL_ADDR": "127.0.0.1",
                             "LL_WWW": str(tmp_path), "LL_CERTS": str(tmp_path / "nowhere")}, timeout_s=15)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "exited with" in proc.stderr and "nowhere" in proc.stderr, proc.stderr


def test_keylog_of_falls_back_to_the_peers(tmp_path):
    """A side without a key log (caddy writes none) is decrypted with its peer's; an
    empty file counts as none; neither side: None."""
    from harness.observe.join import keylog_of

    assert keylog_of(tmp_path, "server") is None
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "keys.log").write_text("")
    (tmp_path / "client").mkdir()
    (tmp_path / "client" / "keys.log").write_text("CLIENT_RANDOM x y\n")
    assert keylog_of(tmp_path, "server") == tmp_path / "client" / "keys.log"
    (tmp_path / "server" / "keys.log").write_text("SERVER_HANDSHAKE_TRAFFIC_SECRET x y\n")
    assert keylog_of(tmp_path, "server") == tmp_path / "server" / "keys.log"


def test_caddy_sends_through_a_lossy_link_with_a_wire_trace(caddy_installed, netns_ready, tmp_path):
    """`longlook transfer --impl caddy`: an aioquic client fetches over h3 through a
    lossy link; caddy's trace and plot come from the capture, said so, and the window
    plotted is the wire's lower bound."""
    import sys

    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "transfer", "--impl", "caddy", "--bytes", "1MB",
                        "--rate", "10mbit", "--rtt", "40ms", "--loss", "0.01", "--seed", "3", "--out", str(out)],
                       capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "derived from the capture" in r.stdout + r.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["ok"] and result["stack"] == "caddy" and result["peer_stack"] == "aioquic"
    events = [json.loads(line) for line in (out / "traces" / "server-0.ndjson").read_text().splitlines()]
    kinds = {e["kind"] for e in events}
    assert {"packet_sent", "packet_acked", "metrics"} <= kinds, kinds
    sent = sum(e["size"] for e in events if e["kind"] == "packet_sent" and e.get("size"))
    assert sent >= 1_000_000
    assert list((out / "report").glob("caddy-server-cwnd.png"))
