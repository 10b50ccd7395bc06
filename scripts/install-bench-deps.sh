#!/usr/bin/env bash
# Installs the Debian packages only the emulator benchmark (bench/) needs, only
# those missing. Not part of `make setup`.
#   iperf3                     bulk TCP/UDP traffic
#   ns3, libns3-dev (3.37)     the comparison link (bench/ns3_link.cc); its
#                              pkg-config files also name libgsl.so, libsqlite3.so
#   libgsl-dev, libsqlite3-dev ... hence these
#   g++, gcc, pkg-config       build bench/ns3_link.cc and bench/udp_probe.c
#   iproute2, procps           namespaces, veth, sysctl
#   linux-perf                 optional, to see where the router's CPU goes
set -euo pipefail

PACKAGES=(iperf3 ns3 libns3-dev libgsl-dev libsqlite3-dev g++ gcc pkg-config iproute2 procps)
OPTIONAL=(linux-perf)

installed() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'; }

missing=()
for pkg in "${PACKAGES[@]}"; do
    installed "$pkg" || missing+=("$pkg")
done
optional=()
for pkg in "${OPTIONAL[@]}"; do
    installed "$pkg" || optional+=("$pkg")
done
if [ "${#missing[@]}" -eq 0 ] && [ "${#optional[@]}" -eq 0 ]; then
    exit 0
fi

echo "install-bench-deps: installing ${missing[*]} ${optional[*]}"
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
if [ "${#missing[@]}" -gt 0 ]; then
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if [ "${#optional[@]}" -gt 0 ]; then
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${optional[@]}" ||
        echo "install-bench-deps: optional ${optional[*]} not installed" >&2
fi
# Debian's iperf3 package may start a system-wide server; the bench needs none.
if command -v systemctl >/dev/null && systemctl is-active --quiet iperf3 2>/dev/null; then
    "${SUDO[@]}" systemctl disable --now iperf3 || true
fi
