#!/usr/bin/env bash
# Runs the whole test suite: builds every product (the host, the example plugins) and runs `swift test`.
# Usage: scripts/test.sh [extra `swift test` arguments, e.g. --filter PluginLoaderTests]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
source scripts/lib/postgres.sh

ensure_system_packages
log "checking the module layering"
scripts/check-layering.sh
log "building all products (debug)"
swift build
# The fuzz targets, over their corpus and a bounded number of new inputs (skip with CMDBUS_SKIP_FUZZ=1).
if [ -z "${CMDBUS_SKIP_FUZZ:-}" ] && [ $# -eq 0 ]; then
    scripts/fuzz.sh 20000
fi
# The host tests load the built plugins and run the built cmdbus binary from here.
export CMDBUS_BIN_DIR="$(swift build --show-bin-path)"
# A throwaway PostgreSQL for the shared-bus tests, stopped however the run ends.
start_test_postgres
# A dashboard test that failed half-way may leave its server running; none outlives the run.
trap 'stop_test_postgres; remove_test_namespaces; pkill -f "cmdbus serve .*cmdbus-dashboard-" 2>/dev/null || true' EXIT
log "running the tests"
swift test "$@"
