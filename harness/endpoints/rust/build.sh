#!/usr/bin/env bash
# Builds the Rust endpoints (quiche-endpoint, quinn-endpoint, tquic-endpoint,
# s2n-quic-endpoint) and the virtual-time harnesses (quinn-virtual, quiche-virtual, which link the
# emulator's core from ../../emulator) from crates.io with the versions pinned
# in Cargo.lock.
# Idempotent: does nothing when every binary exists and no source file (the
# emulator's included) or Cargo.lock changed since the last build. Installs
# the Debian packages of apt-packages.txt first if any is missing (needs root, as
# `make setup` runs).
# Prints one line saying what it did.
set -euo pipefail
cd "$(dirname "$0")"

BINARIES=(target/release/quiche-endpoint target/release/quinn-endpoint target/release/quinn-virtual
          target/release/quiche-virtual target/release/tquic-endpoint target/release/s2n-quic-endpoint)
# Touched after each successful build: cargo leaves a binary untouched when only
# the other one's sources changed, so the binaries' own times cannot serve.
STAMP=target/release/.ll-endpoints-built

# Prints "yes" if a binary or the stamp is missing or a source is newer than the stamp.
stale() {
    local bin
    for bin in "${BINARIES[@]}" "$STAMP"; do
        if [ ! -e "$bin" ]; then echo yes; return; fi
    done
    # ../../emulator: the virtual-time harnesses link the emulator's core.
    if [ -n "$(find . ../../emulator/src ../../emulator/Cargo.toml -path ./target -prune -o -type f \
            \( -name '*.rs' -o -name 'Cargo.toml' -o -name 'Cargo.lock' \) \
            -newer "$STAMP" -print -quit)" ]; then
        echo yes
    fi
}

if [ -z "$(stale)" ]; then
    echo "rust endpoints: up to date (${BINARIES[*]})"
    exit 0
fi

mapfile -t wanted < <(grep -v '^#' apt-packages.txt | grep -v '^[[:space:]]*$')
missing=()
for pkg in "${wanted[@]}"; do
    dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed' || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "rust endpoints: need root to install ${missing[*]} (apt-get install ${missing[*]})" >&2
        exit 1
    fi
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
    PATH="$HOME/.cargo/bin:$PATH"
fi
start=$(date +%s)
# Two jobs at most: the machine's two cores are shared while `make setup` runs.
cargo build --release --locked --quiet -j "${LL_BUILD_JOBS:-2}"
touch "$STAMP"
versions=$(awk '/^name = "(quiche|quinn|tquic|s2n-quic)"$/ {n=$3; getline; printf "%s %s ", n, $3}' Cargo.lock | tr -d '"')
echo "rust endpoints: built ${BINARIES[*]} (${versions% }) in $(( $(date +%s) - start )) s"
