#!/usr/bin/env bash
# Builds in release mode and runs the benchmarks. Figures are ratios against baselines measured in the same run.
# Usage: scripts/bench.sh [--json] [--instructions]
#   --instructions  count instructions per operation of the in-process paths under valgrind instead of timing
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
source scripts/lib/postgres.sh
source scripts/lib/instructions.sh

format=text
mode=timed
for argument in "$@"; do
    case "$argument" in
        --json) format=json ;;
        --instructions) mode=instructions ;;
        -h|--help) sed -n '2,4s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) die "scripts/bench.sh: unknown option '$argument'; use --json, --instructions or --help" ;;
    esac
done

ensure_system_packages
if [ "$mode" = instructions ]; then
    log "building the benchmarks, cmdbus and the Greeter plugin (release)"
    swift build -c release --product CommandBusBenchmarks >&2
    swift build -c release --product cmdbus >&2
    swift build -c release --product Greeter >&2
    run_instruction_counts "$format"
    exit 0
fi
log "building the benchmarks, cmdbus, the plugins and the hello-world baseline (release)"
swift build -c release >&2
# A throwaway PostgreSQL for the shared-bus figures, stopped however the run ends.
start_test_postgres
trap stop_test_postgres EXIT
args=()
[ "$format" = json ] && args+=(--json)
.build/release/CommandBusBenchmarks "${args[@]}"
