"""The tquic endpoint (harness/endpoints/tquic) against docs/endpoints.md, over 127.0.0.1.

Builds nothing: skips when harness/endpoints/tquic/build.sh has not been run. The
checks (2 MB transfer, every CC, multiplexing, appidle, initial window, exit 127,
interop with aioquic) are rust_endpoints.EndpointContract's; tquic adds one: it has
no NewReno, and asking for it is refused the contract's way.
"""

from rust_endpoints import EndpointContract, free_udp_port, run_alone


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
