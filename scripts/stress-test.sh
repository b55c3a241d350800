#!/usr/bin/env bash
# Runs scripts/test.sh several times in a row while stress-ng keeps both cores busy, as a
# shared CI machine does, and prints the last lines of each run.
# Usage: scripts/stress-test.sh [RUNS]   (3 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh

runs="${1:-3}"
if ! command -v stress-ng >/dev/null 2>&1; then
    SYSTEM_PACKAGES=(stress-ng)
    ensure_system_packages
fi
stress-ng --cpu "$(nproc)" --timeout 0 --quiet &
stressor=$!
trap 'kill "$stressor" 2>/dev/null || true; wait "$stressor" 2>/dev/null || true' EXIT
failures=0
for run in $(seq 1 "$runs"); do
    log "run $run of $runs, with stress-ng --cpu $(nproc) beside it"
    started=$SECONDS
    if scripts/test.sh > ".build/test-artifacts/stress-run-$run.log" 2>&1; then result=passed; else result=FAILED; failures=$((failures + 1)); fi
    log "run $run $result in $((SECONDS - started)) s; its last lines:"
    tail -n 4 ".build/test-artifacts/stress-run-$run.log" >&2
done
[ "$failures" -eq 0 ] || die "$failures of $runs loaded runs failed (logs: .build/test-artifacts/stress-run-*.log)"
log "all $runs loaded runs passed"
