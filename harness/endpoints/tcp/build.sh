#!/bin/sh
# Build step of the kernel TCP endpoint (called by `make setup`). Nothing to compile
# (standard library only): it checks that the interpreter `run` will use has TLS 1.3
# and that the kernel offers the CC algorithms, then byte-compiles endpoint.py.
# Fast path: a stamp under .stamps/ newer than the sources, for the same interpreter.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
py=${LL_PYTHON:-}
if [ -z "$py" ]; then
    if [ -x "$root/.venv/bin/python" ]; then py="$root/.venv/bin/python"; else py=python3; fi
fi
stamp="$root/.stamps/endpoint-tcp"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$py" ] \
    && [ -z "$(find "$here/endpoint.py" "$here/run" -newer "$stamp")" ]; then
    echo "tcp endpoint: up to date (for $py)"
    exit 0
fi
"$py" -c 'import ssl, socket; assert ssl.HAS_TLSv1_3 and hasattr(socket, "TCP_CONGESTION")' \
    || { echo "tcp endpoint: $py lacks TLS 1.3 or TCP_CONGESTION" >&2; exit 1; }
"$py" -m py_compile "$here/endpoint.py"
mkdir -p "$root/.stamps"
echo "$py" > "$stamp"
echo "tcp endpoint: ready for $py (kernel $(uname -r), CC available: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control))"
