#!/usr/bin/env bash
# Builds every endpoint (called by `make setup`). Each stack's build.sh is
# idempotent and returns at once when nothing changed; a failing build stops setup
# with that stack's message, since tests of that stack would fail anyway.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# Python endpoints build against the project's interpreter.
export LL_PYTHON="${LL_PYTHON:-$root/.venv/bin/python}"
for stack in aioquic tcp picoquic quic-go quiche quinn tquic s2n-quic kwik; do
    "$here/$stack/build.sh"
done
