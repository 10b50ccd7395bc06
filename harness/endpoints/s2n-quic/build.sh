#!/usr/bin/env bash
# Builds the s2n-quic endpoint: it lives in the shared Rust workspace (../rust), whose
# build script builds every Rust endpoint together and is a no-op when all are up
# to date.
exec "$(dirname "$0")/../rust/build.sh"
