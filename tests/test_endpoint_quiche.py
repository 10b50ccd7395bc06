"""The quiche endpoint (harness/endpoints/quiche) against docs/endpoints.md, over 127.0.0.1.

Builds nothing: skips when harness/endpoints/quiche/build.sh has not been run. The
checks themselves (2 MB transfer, every CC, multiplexing, appidle, initial window,
exit 127, interop with aioquic) live in rust_endpoints.EndpointContract, shared
with the other Rust endpoint.
"""

from rust_endpoints import EndpointContract


class TestQuiche(EndpointContract):
    STACK = "quiche"
