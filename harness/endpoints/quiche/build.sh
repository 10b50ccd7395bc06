#!/usr/bin/env bash
# Builds the quiche endpoint: it lives in the shared Rust workspace (../rust), whose
# build script builds quiche-endpoint and quinn-endpoint together and is a no-op
# when both are up to date.
exec "$(dirname "$0")/../rust/build.sh"
