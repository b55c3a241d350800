#!/usr/bin/env bash
# Runs the whole test suite: builds every product (the host, the example plugins) and runs `swift test`.
# Usage: scripts/test.sh [extra `swift test` arguments, e.g. --filter PluginLoaderTests]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
source scripts/lib/postgres.sh
source scripts/lib/instructions.sh
# Each phase's line says when it began (minutes:seconds into the run).
LOG_ELAPSED=1

ensure_system_packages
log "checking the module layering"
scripts/check-layering.sh
log "building all products (debug)"
swift build
# The fuzz targets, over their corpus and a bounded number of new inputs (skip with CMDBUS_SKIP_FUZZ=1).
if [ -z "${CMDBUS_SKIP_FUZZ:-}" ] && [ $# -eq 0 ]; then
    scripts/fuzz.sh 20000
fi
log "checking the instruction-count workloads run, and run under valgrind"
BENCH_BINARY="$(swift build --show-bin-path)/CommandBusBenchmarks" check_instruction_mode
# The host tests load the built plugins and run the built cmdbus binary from here.
export CMDBUS_BIN_DIR="$(swift build --show-bin-path)"
# A throwaway PostgreSQL for the shared-bus tests, stopped however the run ends.
start_test_postgres
# A test that failed half-way may leave its server running (a dashboard's, or one in a test's
# scratch directory); none outlives the run.
trap 'stop_test_postgres; remove_test_namespaces; pkill -f "cmdbus serve .*(cmdbus-dashboard-|cmdbus-serve-|cmdbus-test-)" 2>/dev/null || true' EXIT
# Fixture plugins' deliberate stdout noise goes to a file, not the log.
mkdir -p .build/test-artifacts
export CMDBUS_FIXTURE_NOISE="$PWD/.build/test-artifacts/fixture-noise.log"
: > "$CMDBUS_FIXTURE_NOISE"
# Swift Testing starts every test case at once unless told otherwise, and most of ours run
# programs (debug `cmdbus` processes, probes, python clients): on two cores a run reached fifty
# processes and a load average of 54, and tests whose handler tasks waited for the starved
# cooperative pool missed their time limits. A few test cases per core keep both busy.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-$(( $(nproc) * 4 ))}"
# The suites that run the built `cmdbus` end to end, run once more against the release build.
RELEASE_SUITES='ServerTests|CommandLineTests|JournalCommandTests|JournalReliabilityTests|IsolationTests|SharedBusTests|DashboardTests'
log "running the tests, at most $SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH at once (full log: .build/test-artifacts/swift-test.log)"
set +e
if [ $# -eq 0 ]; then
    # The template test builds and tests a new package with swiftc, which keeps both cores of a
    # small machine busy: beside the rest it took four minutes and slowed them all; on its own,
    # after them, it takes under half a minute.
    swift test --skip PluginTemplateTests 2>&1 | tee .build/test-artifacts/swift-test.log
    status=${PIPESTATUS[0]}
    swift test --skip-build --filter PluginTemplateTests 2>&1 | tee -a .build/test-artifacts/swift-test.log
    template_status=${PIPESTATUS[0]}
    [ "$status" -ne 0 ] || status=$template_status
else
    swift test "$@" 2>&1 | tee .build/test-artifacts/swift-test.log
    status=${PIPESTATUS[0]}
fi
# The end-to-end suites again, driving the release build's `cmdbus` and plugins: the binary users
# run. Optimization has turned code that passed in debug into a crash (`92feb73`). Skip with
# CMDBUS_SKIP_RELEASE=1.
if [ $# -eq 0 ] && [ "$status" -eq 0 ] && [ -z "${CMDBUS_SKIP_RELEASE:-}" ]; then
    log "building the release products (log: .build/test-artifacts/release-build.log)"
    swift build -c release > .build/test-artifacts/release-build.log 2>&1
    status=$?
    if [ "$status" -ne 0 ]; then
        tail -30 .build/test-artifacts/release-build.log >&2
        log "the release build failed (exit $status)"
    else
        log "running the end-to-end suites against the release products"
        CMDBUS_BIN_DIR="$(swift build -c release --show-bin-path)" swift test --skip-build --filter "$RELEASE_SUITES" 2>&1 \
            | tee -a .build/test-artifacts/swift-test.log
        status=${PIPESTATUS[0]}
    fi
    # The README's first set-up command, as a new user runs it: it builds into ./plugins (the
    # release build is there already) and runs a greeting, subcommands, a C plugin and errors.
    if [ "$status" -eq 0 ]; then
        log "running scripts/demo.sh, the README's first command (log: .build/test-artifacts/demo.log)"
        scripts/demo.sh > .build/test-artifacts/demo.log 2>&1
        status=$?
        if [ "$status" -ne 0 ] || ! grep -q '"greetings":\["Hello, Ada!","Hello, Lin!","Hello, Grace!"\]' .build/test-artifacts/demo.log; then
            tail -30 .build/test-artifacts/demo.log >&2
            log "scripts/demo.sh did not run as the README says (exit $status)"
            status=1
        fi
    fi
fi
set -e
# The last lines name every test that failed, so a reader need not scroll.
failed=$( (grep -aE '^✘ Test .* (failed|recorded an issue)' .build/test-artifacts/swift-test.log | grep -av '^✘ Test run with' || true) | sed -E 's/^✘ Test ([^ ]+).*/\1/' | sort -u)
if [ "$status" -ne 0 ]; then
    log "swift test failed (exit $status); failed tests:"
    if [ -n "$failed" ]; then printf '    %s\n' $failed >&2; else echo "    (none reported: see the log above for a build or crash error)" >&2; fi
    exit "$status"
fi
log "all tests passed"
