"""The s2n-quic endpoint (harness/endpoints/s2n-quic) against docs/endpoints.md, over 127.0.0.1.

Builds nothing: skips when harness/endpoints/s2n-quic/build.sh has not been run. The
checks (2 MB transfer, every CC, multiplexing, appidle, initial window, exit 127,
interop with aioquic) are rust_endpoints.EndpointContract's. s2n-quic writes no qlog
of its own; the endpoint writes one from s2n-quic's event subscriber, so these tests
also hold that trace to what the suite reads from it.
"""

from rust_endpoints import EndpointContract, free_udp_port, qlog_events, run_alone, run_pair


class TestS2nQuic(EndpointContract):
    STACK = "s2n-quic"

    def test_newreno_is_refused_with_the_controllers_it_has(self, tmp_path):
        self._require_built()
        for role in ("server", "client"):
            env = {"ROLE": role, "LL_PORT": str(free_udp_port()), "LL_ADDR": "127.0.0.1",
                   "REQUESTS": "https://127.0.0.1:9/x", "LL_DOWNLOADS": str(tmp_path),
                   "LL_CERTS": str(tmp_path), "LL_CC": "newreno"}
            proc = run_alone(self.run, env)
            assert proc.returncode == 127, (role, proc.returncode, proc.stderr)
            assert "newreno" in proc.stderr and "cubic" in proc.stderr and "bbr" in proc.stderr, proc.stderr

    def test_trace_from_the_event_subscriber(self, tmp_path):
        """The server's trace: every packet sent has a number, a length and its frame
        types; the 1-RTT packets' bytes exceed the object's; the received ACK frames
        acknowledge only packets it sent; the window and bytes in flight are logged;
        event times never go backwards."""
        pair = self._pair(tmp_path)
        pair.add_file("f.bin", 1_000_000)
        self._check(run_pair(pair, self.run, self.run))
        (q,) = pair.server.qlogdir.iterdir()
        events = qlog_events(q)
        sent = [e["data"] for e in events if e["name"] == "transport:packet_sent"]
        assert sent and all(isinstance(d["header"]["packet_number"], int) and d["raw"]["length"] > 0 for d in sent)
        one_rtt = {d["header"]["packet_number"] for d in sent if d["header"]["packet_type"] == "1RTT"}
        assert sum(d["raw"]["length"] for d in sent if d["header"]["packet_type"] == "1RTT") > 1_000_000
        assert any(f["frame_type"] == "stream" for d in sent for f in d["frames"])
        acked = [r for e in events if e["name"] == "transport:packet_received"
                 for f in e["data"].get("frames", []) if f["frame_type"] == "ack"
                 and e["data"]["header"]["packet_type"] == "1RTT" for r in f["acked_ranges"]]
        assert acked, "no ACK frame logged"
        never_sent = [pn for lo, hi in acked for pn in range(lo, hi + 1) if pn not in one_rtt]
        assert not never_sent, f"ACK ranges name 1-RTT packets never sent: {never_sent[:10]}"
        metrics = [e["data"] for e in events if e["name"] == "recovery:metrics_updated"]
        assert any("congestion_window" in m for m in metrics) and any("bytes_in_flight" in m for m in metrics)
        times = [e["time"] for e in events]
        assert times == sorted(times), "event times go backwards"
