#!/usr/bin/env bash
# Builds longlook's endpoint images from the endpoints `make setup` built on the
# host, all from the one docker/Dockerfile: nothing is compiled inside an image, and
# the builds need no network. Usage: scripts/docker-images.sh [STACK[@VERSION]...]
# (default: every stack below). A stack whose host build is missing is skipped with
# the fix. Images are tagged longlook/<stack>:latest, a release other than the pinned
# one longlook/<stack>:<version> from the release cache (harness/endpoints/releases.py,
# which installs it there first if need be); the base comes from $LONGLOOK_BASE_IMAGE
# (default longlook/base:bookworm, made by `make docker-base`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=${LONGLOOK_BASE_IMAGE:-longlook/base:bookworm}
py=${LL_PYTHON:-$root/.venv/bin/python}
stage_root=$root/docker/build
all_stacks=(aioquic picoquic quic-go quiche quinn tquic s2n-quic)

# Stages what the image of stack $1 needs under $2/longlook (the image's /longlook)
# and sets `endpoint`, the command line run_endpoint.sh execs; returns 1 if the
# host build is missing. $3, if given, is a release's directory in the cache: its
# files replace the pinned stack's. Everything one stack's image differs in is here.
stage() {
    local stack=$1 ctx=$2 release=${3:-} ep=$root/harness/endpoints
    local dst=$ctx/longlook
    mkdir -p "$dst/endpoint"
    cp "$root/docker/run_endpoint.sh" "$ctx/"
    if [ -n "$release" ]; then
        stage_release "$stack" "$dst" "$release" || return 1
        return 0
    fi
    case $stack in
        aioquic)
            local version
            version=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$ep/aioquic/caps.json")
            # window_cap.py: LL_MAX_WINDOW (the model property draws caps for aioquic);
            # ack_hold.py: LL_ACK_HOLD_MS (the ACK Delay cap's property holds ACKs).
            cp "$ep/aioquic/endpoint.py" "$ep/aioquic/h3serve.py" "$ep/aioquic/window_cap.py" \
                "$ep/aioquic/ack_hold.py" "$dst/endpoint/"
            # Wheels for the image's Python (bookworm: 3.11, as the project's venv).
            if [ ! -d "$dst/site/aioquic-$version.dist-info" ]; then
                rm -rf "$dst/site"
                "$py" -m pip install --quiet --target "$dst/site" "aioquic==$version"
            fi
            endpoint="env PYTHONPATH=/longlook/site python3 /longlook/endpoint/endpoint.py" ;;
        picoquic)
            # aiopquic has wheels for CPython >= 3.12 only, and bookworm's Python is 3.11:
            # the image gets the 3.12 that build.sh made the endpoint's venv from, trimmed
            # of what an endpoint never imports, and the venv's packages (no network).
            local venv=$ep/picoquic/.venv prefix
            [ -x "$venv/bin/python" ] || return 1
            prefix=$(dirname "$(dirname "$(readlink -f "$venv/bin/python")")")
            cp "$ep/picoquic/endpoint.py" "$ep/picoquic/settings.py" "$dst/endpoint/"
            rm -rf "$dst/python" "$dst/site"
            mkdir -p "$dst/python/bin" "$dst/python/lib" "$dst/site"
            cp "$prefix/bin/python3.12" "$dst/python/bin/"
            cp "$prefix/lib/libpython3.12.so.1.0" "$dst/python/lib/"
            tar -C "$prefix/lib" -c --exclude=test --exclude=idlelib --exclude=tkinter --exclude=turtledemo \
                --exclude=ensurepip --exclude=site-packages --exclude='config-3.12-*' --exclude=lib2to3 \
                --exclude='*.opt-1.pyc' --exclude='*.opt-2.pyc' python3.12 | tar -C "$dst/python/lib" -x
            tar -C "$venv/lib/python3.12/site-packages" -c --exclude='pip' --exclude='pip-*' . | tar -C "$dst/site" -x
            # The interpreter was built for another prefix: it finds its standard
            # library next to itself, but its libpython only through the library path.
            endpoint="env PYTHONPATH=/longlook/site LD_LIBRARY_PATH=/longlook/python/lib"
            endpoint+=" /longlook/python/bin/python3.12 /longlook/endpoint/endpoint.py" ;;
        quic-go)
            install -m 755 "$ep/quic-go/bin/endpoint" "$dst/endpoint/endpoint" 2>/dev/null || return 1
            endpoint=/longlook/endpoint/endpoint ;;
        quiche|quinn|tquic|s2n-quic)
            install -m 755 "$ep/rust/target/release/$stack-endpoint" "$dst/endpoint/endpoint" 2>/dev/null || return 1
            endpoint=/longlook/endpoint/endpoint ;;
        *) echo "docker-images: unknown stack $stack; known: ${all_stacks[*]}" >&2; return 1 ;;
    esac
}

# A release from the cache (harness/endpoints/releases.py): a Python stack's release is
# a site directory that goes first on PYTHONPATH, a compiled one's the program built
# against it. The endpoint's sources and interpreter are the pinned stack's, as on the host.
stage_release() {
    local stack=$1 dst=$2 release=$3
    case $stack in
        aioquic|picoquic)
            stage "$stack" "$(dirname "$dst")" || return 1
            rm -rf "$dst/release"
            cp -a "$release" "$dst/release"
            endpoint=${endpoint/PYTHONPATH=\/longlook\/site/PYTHONPATH=/longlook/release:/longlook/site} ;;
        quic-go|quiche|quinn)
            install -m 755 "$release/endpoint" "$dst/endpoint/endpoint" || return 1
            endpoint=/longlook/endpoint/endpoint ;;
        *) echo "docker-images: $stack has no releases (docs/versions.md)" >&2; return 1 ;;
    esac
}

if ! docker image inspect "$base" >/dev/null 2>&1; then
    echo "docker-images: base image $base missing: run 'make docker-base' (or set LONGLOOK_BASE_IMAGE=debian:bookworm where a registry is reachable)" >&2
    exit 1
fi
stacks=("$@")
if [ ${#stacks[@]} -eq 0 ]; then stacks=("${all_stacks[@]}"); fi
status=0
for spec in "${stacks[@]}"; do
    stack=${spec%%@*} tag=latest release=
    if [ "$spec" != "$stack" ]; then
        tag=${spec#*@}
        # The release's directory in the cache, installed there on first use; the
        # error (an unknown release, one that does not build) is the harness's own line.
        if ! release=$(cd "$root" && "$py" -c 'import sys; from harness.endpoints import releases, StackError
try:
    print(releases.ensure(*sys.argv[1:3], log=lambda m: print("longlook:", m, file=sys.stderr)))
except StackError as e:
    sys.exit(f"docker-images: {e}")' "$stack" "$tag"); then
            status=1
            continue
        fi
    fi
    ctx=$stage_root/$stack${release:+-$tag}
    endpoint=
    if ! stage "$stack" "$ctx" "$release"; then
        echo "docker-images: $spec: host endpoint not built; run 'make setup' first (skipped)" >&2
        status=1
        continue
    fi
    echo "docker-images: building longlook/$stack:$tag from $base"
    # --network none: a build step that reaches out is a bug in the Dockerfile.
    docker build --quiet --network none --build-arg "BASE=$base" --build-arg "ENDPOINT=$endpoint" \
        -f "$root/docker/Dockerfile" -t "longlook/$stack:$tag" "$ctx" >/dev/null
done
exit $status
