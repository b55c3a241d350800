#!/usr/bin/env bash
# Runs the whole test suite: builds every product (the host, the example plugins) and runs `swift test`.
# Usage: scripts/test.sh [extra `swift test` arguments, e.g. --filter PluginLoaderTests]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh

ensure_system_packages
log "building all products (debug)"
swift build
# The host tests load the built plugins and run the built cmdbus binary from here.
export CMDBUS_BIN_DIR="$(swift build --show-bin-path)"
log "running the tests"
swift test "$@"
