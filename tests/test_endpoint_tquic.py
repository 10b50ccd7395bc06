"""The tquic endpoint (harness/endpoints/tquic) against docs/endpoints.md, over 127.0.0.1.

Builds nothing: skips when harness/endpoints/tquic/build.sh has not been run. The
checks (2 MB transfer, every CC, multiplexing, appidle, initial window, exit 127,
interop with aioquic) are rust_endpoints.EndpointContract's; tquic adds one: it has
no NewReno, and asking for it is refused the contract's way.
"""

from rust_endpoints import EndpointContract, free_udp_port, qlog_events, run_alone, run_pair


class TestTquic(EndpointContract):
    STACK = "tquic"

    def test_newreno_is_refused_with_the_controllers_it_has(self, tmp_path):
        self._require_built()
        for role in ("server", "client"):
            env = {"ROLE": role, "LL_PORT": str(free_udp_port()), "LL_ADDR": "127.0.0.1",
                   "REQUESTS": "https://127.0.0.1:9/x", "LL_DOWNLOADS": str(tmp_path),
                   "LL_CERTS": str(tmp_path), "LL_CC": "newreno"}
            proc = run_alone(self.run, env)
            assert proc.returncode == 127, (role, proc.returncode, proc.stderr)
            assert "newreno" in proc.stderr and "cubic" in proc.stderr, proc.stderr

    def test_flow_control_credit_is_the_contracts(self, tmp_path):
        """Both ends advertise LL_FLOW_WINDOW (64 MiB) as their initial credit: tquic caps
        an initial value by its window ceiling when it is set, so an endpoint that sets
        them in the wrong order advertises 15 MB / 6 MB and stalls a long fat transfer."""
        pair = self._pair(tmp_path)
        pair.add_file("f.bin", 100_000)
        self._check(run_pair(pair, self.run, self.run))
        for side in (pair.server, pair.client):
            (q,) = side.qlogdir.iterdir()
            local = [e["data"] for e in qlog_events(q)
                     if e["name"] == "quic:parameters_set" and e["data"].get("owner") == "local"]
            assert local, f"{side.role}: no local parameters_set"
            for key in ("initial_max_data", "initial_max_stream_data_bidi_local", "initial_max_stream_data_bidi_remote"):
                assert local[0][key] == 64 * 1024 * 1024, (side.role, key, local[0][key])


def test_the_client_exits_two_seconds_after_its_close_whatever_its_rtt(netns_ready, tmp_path):
    """The server's first flight dropped and the client's two probes after its Initial
    too: the client's first RTT sample takes seconds, so tquic's draining period (three
    PTOs) after its CONNECTION_CLOSE runs for tens of seconds. The client leaves after
    DRAIN_LIMIT (2 s) all the same; it used to sleep until tquic's timer and miss the
    run's 60 s timeout."""
    import json
    import subprocess
    import sys

    from harness.schedule import handshake
    from harness.schedule.strategies import BaseLink

    schedule = handshake.server_first_flight_dropped(BaseLink(rtt_us=40_000), 0, 2, 2).write(tmp_path / "s.json")
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "transfer", "--impl", "tquic", "--bytes", "50000",
                        "--schedule", str(schedule), "--no-pcap", "--timeout", "40s", "--out", str(out)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["ok"] and result["wall_s"] < 20, result
