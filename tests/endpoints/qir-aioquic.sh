#!/bin/sh
# Our aioquic endpoint behind the images' entry point (docker/run_endpoint.sh), run
# as a local command: the shape of an interop-runner endpoint outside its image.
# tests/test_commands.py passes it to --impl-cmd.
root=$(cd "$(dirname "$0")/../.." && pwd)
LL_ENDPOINT="${LL_PYTHON:-python3} $root/harness/endpoints/aioquic/endpoint.py"
export LL_ENDPOINT
exec "$root/docker/run_endpoint.sh"
