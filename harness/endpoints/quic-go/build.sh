#!/usr/bin/env bash
# Builds longlook's quic-go endpoint (bin/endpoint) from the Go module proxy with
# the versions pinned in go.mod/go.sum. Rebuilds only when a source file, go.mod
# or go.sum is newer than the binary, so `make setup` stays fast.
set -euo pipefail
cd "$(dirname "$0")"

out=bin/endpoint
if [[ -x $out ]] && [[ -z $(find . -maxdepth 1 \( -name '*.go' -o -name go.mod -o -name go.sum \) -newer "$out") ]]; then
    echo "quic-go endpoint: up to date ($out)"
    exit 0
fi

# -mod=readonly: go.sum is the lock file, a build must never rewrite it.
# -p 2: the machine has two cores shared with other builds.
GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -p 2 -trimpath -o "$out" .
echo "quic-go endpoint: built $out (quic-go $(awk '$1=="github.com/quic-go/quic-go"{print $2}' go.mod))"
