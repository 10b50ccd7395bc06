"""longlook endpoint for ngtcp2: Debian's `gtlsserver` (ngtcp2's HTTP/3 example server
on GnuTLS, package ngtcp2-server) as a server.

gtlsserver takes the contract's knobs as flags: its controller (`--cc`: reno, cubic,
bbr, bbr2), the UDP payload size, the flow-control windows, a qlog directory and the
files to serve. It speaks HTTP/3 only, so its peer is aioquic's client, which falls
back to h3 (harness/endpoints/aioquic/h3fetch.py). This wrapper checks the
environment (docs/endpoints.md), starts gtlsserver, prints `{"ready": true}` once its
UDP socket is bound, forwards SIGTERM and exits 0 when it has stopped. gtlsserver dies
with the wrapper (PR_SET_PDEATHSIG). Standalone but for its sibling
harness/endpoints/server_wrapper/supervise.py, which it shares with caddy's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server_wrapper"))
import supervise  # noqa: E402  (harness/endpoints/server_wrapper/supervise.py, shared with caddy)

STACK = "ngtcp2"
#: Debian's ngtcp2-server package (bookworm): ngtcp2 and its example server.
VERSION = "0.12.1"
#: LL_CC → gtlsserver's --cc.
CONTROLLERS = {"newreno": "reno", "cubic": "cubic", "bbr": "bbr", "bbr2": "bbr2"}
DEFAULT_CC = "cubic"
READY_TIMEOUT_S = 10.0
#: gtlsserver closes a connection whose handshake is not done 10 s after it began; the
#: suite keeps the server's direction dark for up to 17 s of a handshake
#: (properties/test_early_crypto.py), and the other endpoints wait 20-60 s.
HANDSHAKE_TIMEOUT_S = 60


class Unsupported(Exception):
    """An option ngtcp2's server cannot honour: exit 127 with one stderr line."""


def command(env: dict[str, str]) -> tuple[list[str], str]:
    """gtlsserver's command line for the contract's environment, and the LL_CC used."""
    if env.get("ROLE") != "server":
        raise Unsupported(f"ROLE={env.get('ROLE')!r}: ngtcp2's endpoint is its example server only; pair it with "
                          "a client that speaks h3 (aioquic)")
    if env.get("LL_DIRECTION", "download") != "download":
        raise Unsupported("LL_DIRECTION=upload: gtlsserver serves files; it takes no uploads")
    cc = env.get("LL_CC") or DEFAULT_CC
    if cc not in CONTROLLERS:
        raise Unsupported(f"ngtcp2 has no LL_CC {cc!r}; known: {', '.join(CONTROLLERS)}")
    if env.get("LL_INITIAL_WINDOW"):
        raise Unsupported("LL_INITIAL_WINDOW unsupported: gtlsserver has no flag for it")
    mds = int(env.get("LL_MAX_DATAGRAM_SIZE", "1252"))
    if mds < 1200:
        raise Unsupported(f"LL_MAX_DATAGRAM_SIZE={mds} unsupported: QUIC needs 1200")
    if shutil.which("gtlsserver") is None:
        raise Unsupported("gtlsserver is not installed (make setup installs Debian's ngtcp2-server)")
    window = env.get("LL_FLOW_WINDOW", str(64 * 1024 * 1024))
    certs = Path(env.get("LL_CERTS", "/certs"))
    argv = ["gtlsserver", "--quiet", f"--htdocs={Path(env.get('LL_WWW', '/www')).resolve()}", f"--cc={CONTROLLERS[cc]}",
            f"--max-udp-payload-size={mds}", f"--max-data={window}", f"--max-stream-data-bidi-local={window}",
            f"--max-stream-data-bidi-remote={window}", f"--max-window={window}", f"--max-stream-window={window}",
            "--max-streams-bidi=1000", f"--handshake-timeout={HANDSHAKE_TIMEOUT_S}s"]
    if env.get("QLOGDIR"):
        Path(env["QLOGDIR"]).mkdir(parents=True, exist_ok=True)
        argv.append(f"--qlog-dir={env['QLOGDIR']}")
    argv += [env.get("LL_ADDR", "0.0.0.0"), env.get("LL_PORT", "4433"), str(certs / "priv.key"), str(certs / "cert.pem")]
    return argv, cc


def bound(port: int) -> bool:
    """Whether a UDP socket of this network namespace is bound to `port`."""
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        if any(int(line.split()[1].rsplit(":", 1)[1], 16) == port for line in lines):
            return True
    return False


def serve(env: dict[str, str]) -> int:
    argv, cc = command(env)
    if env.get("LL_APPLOG"):
        with open(env["LL_APPLOG"], "a") as f:
            f.write(json.dumps({"event": "version", "stack": STACK, "version": VERSION, "cc": cc,
                                "ngtcp2_cc": CONTROLLERS[cc], "t_us": time.monotonic_ns() // 1000,
                                "wall_us": time.time_ns() // 1000}) + "\n")
    # gtlsserver's qlog names its time origin by the wall clock: no monotonic note needed.
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr, env=env,
                            preexec_fn=supervise.die_with_parent)
    port = int(env.get("LL_PORT", "4433"))
    return supervise.supervise(proc, "ngtcp2: gtlsserver", lambda: bound(port), READY_TIMEOUT_S,
                               env.get("LL_TIMEOUT_S"))


def main() -> int:
    try:
        return serve(dict(os.environ))
    except Unsupported as e:
        print(f"ngtcp2: {e}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
