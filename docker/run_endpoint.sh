#!/bin/bash
# Entry point of longlook's endpoint images, QUIC Interop Runner style: the image
# gets ROLE, TESTCASE, REQUESTS, QLOGDIR, SSLKEYLOGFILE and the /www, /downloads,
# /certs mounts, and serves on port 443. It maps them onto longlook's endpoint
# contract (docs/endpoints.md: LL_* variables), which the harness may also set
# directly. Exit 127 means the endpoint cannot honour a request.
set -u

# The interop runner's images run /setup.sh (routes through `sim`) where it exists.
if [ -x /setup.sh ]; then /setup.sh; fi

# Both worlds start the endpoint before its network is wired: the runner's images
# wait until the simulator answers on sim:57832, and so do ours (the harness
# listens there once the emulated link is up). Bash's /dev/tcp needs no tools.
wait_for_sim() {
    local deadline=$((SECONDS + ${LL_SIM_WAIT_S:-30}))
    until (exec 3<>/dev/tcp/sim/57832) 2>/dev/null; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "run_endpoint: sim:57832 did not answer within ${LL_SIM_WAIT_S:-30} s" >&2
            exit 1
        fi
        sleep 0.02
    done
}
# Run as a local command (harness/testbed/commands.py), the link is up before we start and
# there is no `sim` to ask.
if [ -z "${LL_NETWORK_READY:-}" ]; then wait_for_sim; fi

case "${TESTCASE:-}" in
    transfer|multiplexing|appidle) ;;
    *) echo "run_endpoint: test case '${TESTCASE:-}' not supported" >&2; exit 127 ;;
esac

export LL_WWW=${LL_WWW:-/www}
export LL_DOWNLOADS=${LL_DOWNLOADS:-/downloads}
export LL_CERTS=${LL_CERTS:-/certs}
export LL_ADDR=${LL_ADDR:-0.0.0.0}
export LL_PORT=${LL_PORT:-443}
if [ -z "${LL_APPLOG:-}" ] && [ -d /logs ]; then export LL_APPLOG=/logs/app.ndjson; fi
if [ -n "${QLOGDIR:-}" ]; then mkdir -p "$QLOGDIR"; fi
# The interop runner's certificates are cert.pem and priv.key, as ours are.

# LL_ENDPOINT is set by each image's Dockerfile (a command line, split on spaces).
# shellcheck disable=SC2086
exec $LL_ENDPOINT
