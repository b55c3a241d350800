# Shared helpers for the scripts in scripts/. Source it; don't run it.

# A phase's line on stderr. With $LOG_ELAPSED set (scripts/test.sh sets it) each begins with the
# minutes and seconds since the script started, so a CI log shows where its time went.
log() {
    if [ -n "${LOG_ELAPSED:-}" ]; then
        printf '==> [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2
    else
        printf '==> %s\n' "$*" >&2
    fi
}

die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The Debian packages the project needs beyond the Swift toolchain, installed when missing.
# gcc: the tests compile deliberately bad plugins from C.
# libsqlite3-dev, pkg-config: the journal's SQLite (the CSQLite system-library target).
# libpq-dev: the shared bus's client library (the CLibPQ system-library target);
# postgresql: a throwaway server for the shared-bus tests and benchmarks;
# iproute2: network namespaces for the test that puts a host across a real network;
# chromium: renders the dashboard in its tests; prometheus: promtool checks /metrics, and
# a real Prometheus answers the Grafana dashboard's queries;
# graphviz: renders `journal tree --format dot` in its test; valgrind: `scripts/bench.sh --instructions`;
# zsh: `cmdbus completion zsh` is tested in a real interactive zsh.
SYSTEM_PACKAGES=(gcc libsqlite3-dev pkg-config libpq-dev postgresql iproute2 chromium prometheus graphviz valgrind zsh)

ensure_system_packages() {
    local missing=()
    for package in "${SYSTEM_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    # The server tests drive cmdbus serve from small Python clients; any python3 on PATH will do.
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing missing system packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq || die "apt-get update failed; install ${missing[*]} by hand"
    $sudo apt-get install -y -qq "${missing[@]}" >/dev/null || die "could not install ${missing[*]}"
}
