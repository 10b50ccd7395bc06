#!/usr/bin/env bash
# Runs the properties N times with the ci profile and counts the runs that pass
# (recorded findings xfail and count as passing). The ci profile must pass N out
# of N on every stock stack; a stack that does not is flaky, which is a defect of
# the suite, not a finding.
#   scripts/flake-check.sh [N] [IMPL]      e.g. scripts/flake-check.sh 10 aioquic,quic-go
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
impl=${2:-aioquic,quic-go}
make setup >/dev/null
passed=0
# One artifacts directory per stack set, so checks of several stacks can follow each other.
tag=${impl//,/-}
# Each log ends with the 15 slowest cases' times: where the 10 min budget goes.
for i in $(seq 1 "$runs"); do
    start=$(date +%s)
    if .venv/bin/python -m pytest properties/ --impl "$impl" --hypothesis-profile ci -v -rsxX --durations=15 -p no:cacheprovider \
        --artifacts "artifacts/flake-$tag-$i" >"artifacts/flake-$tag-$i.log" 2>&1; then
        passed=$((passed + 1)); verdict=pass
    else
        verdict="FAIL (artifacts/flake-$tag-$i.log)"
    fi
    # pytest's summary line: inconclusive runs are skips, and a pass with many of
    # them says less than a pass without.
    # -v puts each case's outcome (and an inconclusive skip's reason) on its own line.
    summary=$(grep -E '^=* ?[0-9]+ (passed|failed).* in [0-9.]+s' "artifacts/flake-$tag-$i.log" | tail -1 | sed -E 's/^=+ | =+$//g')
    echo "flake-check: run $i/$runs: $verdict in $(( $(date +%s) - start )) s: ${summary:-no summary}" >&2
done
echo "flake-check: $passed passed, $((runs - passed)) failed (impl $impl, ci profile)"
[ "$passed" -eq "$runs" ]
