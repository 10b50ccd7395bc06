#!/usr/bin/env bash
# Builds the base image of docker/Dockerfile without an image registry:
# debootstrap a minimal Debian bookworm and `docker import` it (about 30 s).
# Idempotent: an existing image of that name is kept (LONGLOOK_REBUILD_BASE=1 rebuilds).
# Where a registry is reachable, `debian:bookworm` serves as well: pass it as the
# BASE build argument instead (docs/docker.md).
set -euo pipefail

image=${LONGLOOK_BASE_IMAGE:-longlook/base:bookworm}
mirror=${LONGLOOK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# python3: the aioquic endpoint; iproute2, ethtool: the interop runner's /setup.sh
# conventions; procps: `ps` when debugging inside a container.
include=python3,iproute2,ethtool,procps,ca-certificates

if [ -z "${LONGLOOK_REBUILD_BASE:-}" ] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "docker-base: $image exists"
    exit 0
fi
if ! command -v debootstrap >/dev/null; then
    echo "docker-base: installing debootstrap"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null
fi
root=$(mktemp -d /var/tmp/longlook-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "docker-base: debootstrap --variant=minbase bookworm into $root"
debootstrap --variant=minbase --include="$include" bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
    echo "docker-base: debootstrap failed; last lines of $root.log:" >&2
    tail -n 5 "$root.log" >&2
    exit 1
}
rm -f "$root.log"
# Package lists and caches only make the image bigger; images never run apt.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
tar -C "$root" -c . | docker import --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo "docker-base: built $image ($(docker image inspect --format '{{.Size}}' "$image") bytes)"
