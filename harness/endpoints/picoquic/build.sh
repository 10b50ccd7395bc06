#!/bin/sh
# Builds the picoquic endpoint: a Python >= 3.12 venv in .venv with the pinned
# aiopquic (picoquic's binding) from PyPI. Idempotent: a stamp newer than the
# inputs means there is nothing to do.
set -eu
here=$(dirname "$(readlink -f "$0")")
venv="$here/.venv"
stamp="$venv/.longlook-stamp"

if [ -f "$stamp" ] && [ "$stamp" -nt "$here/requirements.txt" ] && [ "$stamp" -nt "$here/build.sh" ]; then
    echo "picoquic endpoint: up to date ($venv)"
    exit 0
fi

# aiopquic ships wheels for CPython >= 3.12 only; the machines have 3.12 through pyenv.
python="${LONGLOOK_PYTHON312:-}"
if [ -z "$python" ]; then
    root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    python="$root/versions/3.12.1/bin/python3.12"
    [ -x "$python" ] || python=$(command -v python3.12 || true)
fi
if [ -z "$python" ] || [ ! -x "$python" ]; then
    echo "picoquic endpoint: needs Python >= 3.12 (set LONGLOOK_PYTHON312)" >&2
    exit 1
fi

rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    -r "$here/requirements.txt"
"$venv/bin/python" -c 'import aiopquic._binding._transport'
touch "$stamp"
echo "picoquic endpoint: built $venv ($("$venv/bin/python" -c 'import aiopquic; from aiopquic import _build_info as b; print(f"aiopquic {aiopquic.__version__}, picoquic {b.PICOQUIC_VERSION}")'))"
