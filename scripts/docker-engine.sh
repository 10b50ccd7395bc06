#!/usr/bin/env bash
# Makes a Docker engine available for the Docker backend (docs/docker.md), idempotently:
#   1. a running engine (DOCKER_HOST or the default socket) is used as it is;
#   2. otherwise docker.io is installed if dockerd is missing, and dockerd is started
#      with --bridge=none --iptables=false: containers run with --network none, so
#      the engine needs no bridge, and the host's firewall and routes stay untouched.
# Prints one line naming the engine in use. Exits 1 with the fix when none can run.
set -euo pipefail

log=${LONGLOOK_DOCKERD_LOG:-/var/log/longlook-dockerd.log}

engine_up() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

say_engine() {
    local version root
    version=$(docker version --format '{{.Server.Version}}')
    root=$(docker info --format '{{.DockerRootDir}}' 2>/dev/null || echo '?')
    echo "docker-engine: using Docker ${version} at ${DOCKER_HOST:-unix:///var/run/docker.sock} (root ${root})"
}

if command -v docker >/dev/null && engine_up; then
    say_engine
    exit 0
fi
if [ -n "${DOCKER_HOST:-}" ]; then
    echo "docker-engine: DOCKER_HOST=${DOCKER_HOST} does not answer; start that engine or unset DOCKER_HOST" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "docker-engine: no running Docker engine, and starting one needs root: run 'sudo make docker-engine'" >&2
    exit 1
fi
if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
    echo "docker-engine: installing docker.io (Debian's Docker engine)"
    apt-get update -q >/dev/null
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io >/dev/null; then
        echo "docker-engine: apt-get install docker.io failed; install a Docker engine by hand and start it" >&2
        exit 1
    fi
fi
# Debian's package may have started its own dockerd through systemd, with a bridge;
# only where there is no systemd (containers, CI) do we start one ourselves.
if ! engine_up; then
    echo "docker-engine: starting dockerd --bridge=none --iptables=false (log: ${log})"
    # setsid: the engine outlives this script and the make that ran it.
    setsid dockerd --bridge=none --iptables=false --ip6tables=false >>"$log" 2>&1 </dev/null &
    for _ in $(seq 1 150); do
        engine_up && break
        sleep 0.2
    done
fi
if ! engine_up; then
    echo "docker-engine: dockerd did not come up within 30 s; its log ends with:" >&2
    tail -n 5 "$log" >&2 || true
    exit 1
fi
say_engine
