#!/usr/bin/env bash
# Builds cmdbus in release mode and installs it, so `cmdbus` works from any directory.
# Usage: scripts/install.sh [PREFIX]
#   PREFIX  where to install: PREFIX/bin/cmdbus. Default: /usr/local as root, else ~/.local.
# $CMDBUS_INSTALL_SCRATCH names another build directory than .build (a test uses one).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
source "$repo/scripts/lib/common.sh"

[ $# -le 1 ] || die "usage: scripts/install.sh [PREFIX]"
if [ $# -eq 1 ]; then prefix="$1"; elif [ "$(id -u)" -eq 0 ]; then prefix=/usr/local; else prefix="$HOME/.local"; fi
scratch=()
[ -n "${CMDBUS_INSTALL_SCRATCH:-}" ] && scratch=(--scratch-path "$CMDBUS_INSTALL_SCRATCH")

ensure_system_packages
log "building cmdbus (release)"
(cd "$repo" && swift build -c release --product cmdbus "${scratch[@]}" >&2)
bin="$(cd "$repo" && swift build -c release --show-bin-path "${scratch[@]}")"
mkdir -p "$prefix/bin" || die "cannot create $prefix/bin; choose another PREFIX (scripts/install.sh ~/.local)"
install -m 0755 "$bin/cmdbus" "$prefix/bin/cmdbus"
log "installed $prefix/bin/cmdbus"
case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) log "$prefix/bin is not on your PATH; add it: echo 'export PATH=\"$prefix/bin:\$PATH\"' >> ~/.bashrc, then open a new shell" ;;
esac
log "for completion in bash: echo 'source <(cmdbus completion bash)' >> ~/.bashrc"
