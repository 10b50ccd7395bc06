#!/usr/bin/env bash
# Installs the Debian packages the harness and its tests need, only those missing.
# iproute2: `ip netns exec`; iperf3: throughput checks; strace: tests/test_offload.py
# counts the sends an endpoint segments (GSO) with and without LL_OFFLOAD=off.
# Bench-only packages (ns-3, g++) live in scripts/install-bench-deps.sh.
set -euo pipefail

# cmake, libclang-dev: quiche's BoringSSL build and bindgen (harness/endpoints/rust).
# graphviz: `dot` renders the state-transition diagrams (harness/report/diagram.py).
# tshark: cross-checks our QUIC decryption in tests (tests/test_wire_tshark.py).
# openjdk-17-jre-headless: runs TLC, the TLA+ model checker (make tlc, harness/model).
# chromium, chromium-driver: headless Chromium, driven by Selenium, opens the report
# the way a person does (tests/test_report_browser.py) and is an endpoint
# (harness/endpoints/chromium). firefox-esr: headless Firefox (neqo), an endpoint
# driven over WebDriver BiDi (harness/endpoints/firefox). caddy: a production HTTP/3
# server, an endpoint (harness/endpoints/caddy) that runs only inside the run's namespaces.
# ngtcp2-server: ngtcp2's HTTP/3 example server on GnuTLS (gtlsserver), an endpoint
# (harness/endpoints/ngtcp2).
PACKAGES=(iproute2 iperf3 strace cmake libclang-dev graphviz tshark openjdk-17-jre-headless chromium chromium-driver firefox-esr
          caddy ngtcp2-server)
# python3.11-venv: `python3.11 -m venv` with the distribution's interpreter, which
# the Makefile prefers when it is there (PYTHON_BOOTSTRAP).
if [ -x /usr/bin/python3.11 ]; then
    PACKAGES+=(python3.11-venv)
fi

# Prints the packages of "$@" that dpkg does not report as installed.
missing_packages() {
    local pkg
    for pkg in "$@"; do
        if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
            echo "$pkg"
        fi
    done
}

mapfile -t missing < <(missing_packages "${PACKAGES[@]}")
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

echo "install-system-deps: installing ${missing[*]}"
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
        echo "install-system-deps: need root (or sudo) to install: ${missing[*]}" >&2
        exit 1
    fi
    SUDO=(sudo)
fi
# A fresh machine has no package lists yet; update once before installing.
"${SUDO[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
# Debian's caddy package enables a system-wide caddy.service; the suite starts its own
# caddy per run, so a host with systemd keeps none listening on :80.
if printf '%s\n' "${missing[@]}" | grep -qx caddy && command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    "${SUDO[@]}" systemctl disable --now caddy.service || true
fi
