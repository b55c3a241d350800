#!/usr/bin/env bash
# Builds the host and the example plugins, installs them into ./plugins, and runs a few commands:
# a greeting, subcommands across plugins, a C plugin, a question, and some errors.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/lib/common.sh

scripts/build-plugins.sh ./plugins
cmdbus="$(swift build -c release --show-bin-path)/cmdbus"

show() {
    printf '\n$ cmdbus %s\n' "$*"
    set +e
    "$cmdbus" "$@"
    local status=$?
    set -e
    printf '(exit %d)\n' "$status"
}

show plugins
show run greet '{"name": "Ada"}'
show run greet-all '{"names": ["Ada", "Lin", "Grace"]}'
show run c.echo -p text=hello -p count=2
show can greet -p name=Ada
show can greet -p name=
show run greet '{"nom": "Ada"}'
show run c.fail '{}'
show run no.such.command --json

echo
echo "To use cmdbus from any directory, install it: scripts/install.sh (into ~/.local/bin, or /usr/local/bin as root)."
