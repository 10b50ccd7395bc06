#!/bin/sh
# Build step of the aioquic endpoint (called by `make setup`). Nothing to compile:
# it makes sure the interpreter `run` will use has the aioquic pinned in
# requirements.txt, installing it with pip if not, and byte-compiles endpoint.py.
# Fast path: a stamp under .stamps/ newer than the sources, for the same interpreter.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
py=${LL_PYTHON:-}
if [ -z "$py" ]; then
    if [ -x "$root/.venv/bin/python" ]; then py="$root/.venv/bin/python"; else py=python3; fi
fi
pin=$(sed -n 's/^aioquic==\([^ ]*\).*/\1/p' "$root/requirements.txt")
stamp="$root/.stamps/endpoint-aioquic"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$py aioquic==$pin" ] \
    && [ -z "$(find "$here/endpoint.py" "$here/run" "$root/requirements.txt" -newer "$stamp")" ]; then
    echo "aioquic endpoint: up to date (aioquic $pin for $py)"
    exit 0
fi
have=$("$py" -c 'import aioquic; print(aioquic.__version__)' 2>/dev/null || true)
if [ "$have" != "$pin" ]; then
    "$py" -m pip install --quiet "aioquic==$pin"
fi
"$py" -m py_compile "$here/endpoint.py"
mkdir -p "$root/.stamps"
echo "$py aioquic==$pin" > "$stamp"
echo "aioquic endpoint: aioquic $pin ready for $py"
