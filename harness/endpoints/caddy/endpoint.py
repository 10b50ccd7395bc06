"""longlook endpoint for caddy: Debian's caddy as a production HTTP/3 server.

caddy serves files over HTTP/3 (ALPN h3) with the quic-go it was built with; it is a
server only, sends only (downloads), and has none of the contract's knobs: no
congestion-control choice (quic-go's Reno sender), no datagram size, no qlog, no key
log. This wrapper turns the contract's environment (docs/endpoints.md) into a
Caddyfile, starts `caddy run` on it, prints `{"ready": true}` once caddy says its
HTTP/3 listener runs, forwards SIGTERM and exits with caddy. The run's wire view is
decrypted with the client's key log (the TLS secrets are the connection's).

caddy dies with this wrapper (PR_SET_PDEATHSIG), and the wrapper with the runner (the
harness's lifeline), so a killed run leaves no caddy behind. Standalone but for its
sibling harness/endpoints/server_wrapper/supervise.py, which it shares with ngtcp2's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server_wrapper"))
import supervise  # noqa: E402  (harness/endpoints/server_wrapper/supervise.py, shared with ngtcp2)

STACK = "caddy"
#: The quic-go inside Debian's caddy 2.6.2-5 (its Built-Using field); caps.json says the same.
QUIC_GO = "0.29.0"
#: quic-go's only controller: a NewReno-style sender (its CUBIC code in Reno mode).
CC = "newreno"
SERVER_NAME = "server.longlook.test"
#: caddy's JSON log line that says the HTTP/3 listener is up.
READY_MSG = "server running"
READY_TIMEOUT_S = 20.0


class Unsupported(Exception):
    """An option caddy cannot honour: exit 127 with one stderr line."""


def caddyfile(addr: str, port: int, www: Path, certs: Path, data: Path) -> str:
    """HTTP/3 only, the run's certificate, files from LL_WWW; what caddy keeps (its
    autosaved config, its storage) goes under `data`, deleted at exit."""
    return f"""{{
	admin off
	auto_https off
	default_sni {SERVER_NAME}
	storage file_system {data}
	servers {{
		protocols h3
	}}
}}
https://:{port} {{
	bind {addr}
	tls {certs / "cert.pem"} {certs / "priv.key"}
	@origin path /
	header @origin Content-Type text/html
	respond @origin "<!doctype html><title>longlook</title><p>longlook test origin</p>" 200
	root * {www}
	file_server
}}
"""


def check(env: dict[str, str]) -> None:
    """Refuses what caddy cannot do, the contract's way (exit 127)."""
    if env.get("ROLE") != "server":
        raise Unsupported(f"ROLE={env.get('ROLE')!r}: caddy is a server only; pair it with a client that speaks h3 "
                          "(aioquic, chromium, firefox)")
    if env.get("LL_DIRECTION", "download") != "download":
        raise Unsupported("LL_DIRECTION=upload: caddy serves files; it takes no uploads")
    cc = env.get("LL_CC")
    if cc and cc != CC:
        raise Unsupported(f"LL_CC={cc} unsupported: caddy's quic-go {QUIC_GO} has only its Reno sender ({CC})")
    if env.get("LL_INITIAL_WINDOW"):
        raise Unsupported("LL_INITIAL_WINDOW unsupported: caddy's quic-go has a fixed initial window (32 packets)")
    if shutil.which("caddy") is None:
        raise Unsupported("caddy is not installed (make setup installs Debian's caddy)")


def caddy_version() -> str:
    out = subprocess.run(["caddy", "version"], capture_output=True, text=True, timeout=10).stdout.split()
    return out[0].lstrip("v") if out else "unknown"


def write_version(path: str | None, version: str) -> None:
    """The app log's version record; its t_us (CLOCK_MONOTONIC) and wall_us are read together."""
    if not path:
        return
    rec = {"event": "version", "stack": STACK, "version": version, "cc": CC, "quic_go": QUIC_GO,
           "t_us": time.monotonic_ns() // 1000, "wall_us": time.time_ns() // 1000}
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


def serve(env: dict[str, str]) -> int:
    check(env)
    version = caddy_version()
    write_version(env.get("LL_APPLOG"), version)
    with tempfile.TemporaryDirectory(prefix="longlook-caddy-") as tmp:
        home = Path(tmp)
        conf = home / "Caddyfile"
        conf.write_text(caddyfile(env.get("LL_ADDR", "0.0.0.0"), int(env.get("LL_PORT", "4433")),
                                  Path(env.get("LL_WWW", "/www")).resolve(),
                                  Path(env.get("LL_CERTS", "/certs")).resolve(), home / "data"))
        # caddy keeps its config and data under XDG directories: ours, deleted at exit.
        child_env = dict(os.environ, XDG_CONFIG_HOME=str(home / "config"), XDG_DATA_HOME=str(home / "data"),
                         HOME=str(home))
        proc = subprocess.Popen(["caddy", "run", "--config", str(conf), "--adapter", "caddyfile"],
                                stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=subprocess.PIPE, text=True,
                                env=child_env, preexec_fn=supervise.die_with_parent)
        ready = threading.Event()

        def relay() -> None:
            for line in proc.stderr:
                sys.stderr.write(line)
                if READY_MSG in line:
                    ready.set()

        threading.Thread(target=relay, daemon=True).start()
        # caddy exits 0 on SIGTERM after a graceful shutdown: the contract's 0 for a server.
        return supervise.supervise(proc, "caddy", ready.is_set, READY_TIMEOUT_S, env.get("LL_TIMEOUT_S"))


def main() -> int:
    try:
        return serve(dict(os.environ))
    except Unsupported as e:
        print(f"caddy: {e}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
