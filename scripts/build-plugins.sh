#!/usr/bin/env bash
# Release build of the host and every example plugin; copies the plugins into DIR (default ./plugins).
# Usage: scripts/build-plugins.sh [DIR]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
source "$repo/scripts/lib/common.sh"

# The example plugins: SwiftPM dynamic-library products of this package.
PLUGIN_PRODUCTS=(Greeter GreetAll CEcho Counter)

dir="${1:-./plugins}"
ensure_system_packages
log "building cmdbus and the plugins (release)"
(cd "$repo" && swift build -c release --product cmdbus >&2)
for product in "${PLUGIN_PRODUCTS[@]}"; do
    (cd "$repo" && swift build -c release --product "$product" >&2)
done
bin="$(cd "$repo" && swift build -c release --show-bin-path)"
mkdir -p "$dir"
for product in "${PLUGIN_PRODUCTS[@]}"; do
    cp "$bin/lib$product.so" "$dir/"
done
log "installed ${#PLUGIN_PRODUCTS[@]} plugins into $dir; cmdbus is $bin/cmdbus"
