"""The ngtcp2 endpoint (harness/endpoints/ngtcp2: Debian's gtlsserver) over 127.0.0.1.

gtlsserver is Debian's ngtcp2-server package (make setup installs it); these tests
skip where it is missing. It speaks only HTTP/3, so its peer is aioquic's client.
"""

import shutil

import pytest
from rust_endpoints import ENDPOINTS, Pair, applog_records, free_udp_port, qlog_events, run_alone, run_pair, sha256

NGTCP2 = ENDPOINTS / "ngtcp2" / "run"
AIOQUIC = ENDPOINTS / "aioquic" / "run"


@pytest.fixture
def installed():
    if shutil.which("gtlsserver") is None:
        pytest.skip("gtlsserver is not installed (make setup installs Debian's ngtcp2-server)")


@pytest.mark.parametrize("cc, native", [("cubic", "cubic"), ("newreno", "reno"), ("bbr2", "bbr2")])
def test_an_aioquic_client_downloads_from_gtlsserver(installed, tmp_path, cc, native):
    """Two objects over h3: bytes whole, the version record names the controller, the
    server's qlog logs its window, and its key log holds the 1-RTT secrets."""
    pair = Pair(tmp_path)
    pair.add_file("a.bin", 800_000)
    pair.add_file("b.bin", 200_000)
    run_pair(pair, NGTCP2, AIOQUIC, server_env={"LL_CC": cc})
    assert pair.client_rc == 0 and pair.server_rc == 0, pair.describe()
    for name, src in pair.files.items():
        assert sha256(pair.downloads / name) == sha256(src), name
    (version,) = [r for r in applog_records(pair.server.applog) if r["event"] == "version"]
    assert (version["stack"], version["cc"], version["ngtcp2_cc"]) == ("ngtcp2", cc, native)
    (q,) = pair.server.qlogdir.iterdir()
    assert any("congestion_window" in e["data"] for e in qlog_events(q) if e["name"] == "recovery:metrics_updated")
    assert "SERVER_TRAFFIC_SECRET_0" in pair.server.keylog.read_text()


@pytest.mark.parametrize("env, says", [
    ({"ROLE": "client"}, "server only"),
    ({"ROLE": "server", "LL_CC": "prague"}, "prague"),
    ({"ROLE": "server", "LL_DIRECTION": "upload"}, "no uploads"),
    ({"ROLE": "server", "LL_MAX_DATAGRAM_SIZE": "1000"}, "1200"),
])
def test_what_gtlsserver_cannot_do_is_refused_with_exit_127(installed, tmp_path, env, says):
    proc = run_alone(NGTCP2, {"LL_PORT": str(free_udp_port()), "LL_ADDR": "127.0.0.1", "LL_WWW": str(tmp_path),
                              "LL_CERTS": str(tmp_path), **env})
    assert proc.returncode == 127 and says in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
