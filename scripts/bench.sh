#!/usr/bin/env bash
# Builds in release mode and runs the benchmarks. Figures are ratios against baselines measured in the same run.
# Usage: scripts/bench.sh [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
source scripts/lib/postgres.sh

ensure_system_packages
log "building the benchmarks, cmdbus, the plugins and the hello-world baseline (release)"
swift build -c release >&2
# A throwaway PostgreSQL for the shared-bus figures, stopped however the run ends.
start_test_postgres
trap stop_test_postgres EXIT
.build/release/CommandBusBenchmarks "$@"
