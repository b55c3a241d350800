# A throwaway PostgreSQL cluster for the tests and benchmarks. Source it; don't run it.
# start_test_postgres: initdb into a temporary directory, listen only on a Unix socket there,
# run as the `postgres` system user when we are root (initdb refuses root), and export
#   CMDBUS_TEST_POSTGRES      a libpq URL for the cluster
#   CMDBUS_TEST_POSTGRES_DIR  the directory (data in data/, socket and log beside it)
#   CMDBUS_TEST_POSTGRES_BIN  the server binaries, for tests that restart it
#   CMDBUS_TEST_POSTGRES_OPTIONS  the server options, for tests that stop it and start it again
# stop_test_postgres: stops it and removes the directory.

postgres_bin() { pg_config --bindir 2>/dev/null || ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1; }

as_postgres() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_test_postgres() {
    local bin dir user
    bin="$(postgres_bin)"
    dir="$(mktemp -d /tmp/cmdbus-pg.XXXXXX)"
    chmod 755 "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    user="$( [ "$(id -u)" -eq 0 ] && echo postgres || id -un )"
    as_postgres "$bin/initdb" -D "$dir/data" -A trust -U "$user" --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    # The server's options, for a test that stops and starts it again (pg_ctl restart keeps them itself).
    export CMDBUS_TEST_POSTGRES_OPTIONS="-k $dir -c listen_addresses='' -c max_connections=300 -c shared_buffers=128MB"
    as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -o "$CMDBUS_TEST_POSTGRES_OPTIONS" start >/dev/null \
        || { cat "$dir/server.log" >&2; die "PostgreSQL did not start"; }
    export CMDBUS_TEST_POSTGRES="postgresql:///postgres?host=$dir&user=$user"
    export CMDBUS_TEST_POSTGRES_DIR="$dir"
    export CMDBUS_TEST_POSTGRES_BIN="$bin"
    log "PostgreSQL for the tests: $dir (socket only)"
}

stop_test_postgres() {
    [ -n "${CMDBUS_TEST_POSTGRES_DIR:-}" ] || return 0
    # Bus hosts a failed or interrupted test left behind: they would retry this cluster forever.
    pkill -KILL -f "cmdbus serve --bus .*host=$CMDBUS_TEST_POSTGRES_DIR" 2>/dev/null || true
    as_postgres "$CMDBUS_TEST_POSTGRES_BIN/pg_ctl" -D "$CMDBUS_TEST_POSTGRES_DIR/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$CMDBUS_TEST_POSTGRES_DIR"
}

# Network namespaces a killed test run may have left (the shared-bus network test makes cmdbus-*).
remove_test_namespaces() {
    command -v ip >/dev/null 2>&1 || return 0
    ip netns list 2>/dev/null | awk '/^cmdbus-/ {print $1}' | while read -r name; do ip netns del "$name" 2>/dev/null || true; done
}
