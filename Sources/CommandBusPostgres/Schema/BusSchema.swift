/// The shared bus's tables, in a schema of their own, and their migrations.
///
/// Migrations run under a transaction-scoped advisory lock, so ten hosts starting at once
/// migrate once; a database whose schema is newer than this binary is refused.
package enum BusSchema {
    /// The schema version this binary writes and reads.
    package static let version = 7
    /// The PostgreSQL schema holding the bus.
    package static let name = "cmdbus"

    /// Each version's statements; `migrations[n - 1]` takes the schema from n - 1 to n.
    private static let migrations: [[String]] = [
        [
            """
            CREATE TABLE cmdbus.commands (
                id uuid PRIMARY KEY,
                seq bigserial UNIQUE NOT NULL,
                name text NOT NULL,
                payload bytea NOT NULL,
                metadata jsonb NOT NULL DEFAULT '{}',
                parent_id uuid,
                correlation_id uuid NOT NULL,
                idempotency_key text UNIQUE,
                kind text NOT NULL DEFAULT 'command' CHECK (kind IN ('command', 'probe')),
                priority int NOT NULL DEFAULT 0,
                state text NOT NULL CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'cancelled', 'timedOut')),
                run_at timestamptz NOT NULL DEFAULT now(),
                created_at timestamptz NOT NULL DEFAULT now(),
                started_at timestamptz,
                finalized_at timestamptz,
                attempt int NOT NULL DEFAULT 0,
                max_attempts int NOT NULL DEFAULT 5,
                lease_owner uuid,
                attempted_by text[] NOT NULL DEFAULT '{}',
                declined_by uuid[] NOT NULL DEFAULT '{}',
                cancel_requested boolean NOT NULL DEFAULT false,
                timeout_ms bigint,
                result bytea,
                error_code text,
                error_message text,
                undo_of uuid,
                undone_by uuid,
                CHECK ((state IN ('succeeded', 'failed', 'cancelled', 'timedOut')) = (finalized_at IS NOT NULL)),
                CHECK ((state = 'running') = (lease_owner IS NOT NULL))
            )
            """,
            // Leads with the name: a host claims only names it handles, and work it cannot run
            // must not sit in front of work it can.
            "CREATE INDEX commands_claim ON cmdbus.commands (name, priority DESC, run_at, seq) WHERE state = 'pending'",
            "CREATE INDEX commands_running ON cmdbus.commands (lease_owner) WHERE state = 'running'",
            "CREATE INDEX commands_parent ON cmdbus.commands (parent_id) WHERE parent_id IS NOT NULL",
            """
            CREATE UNLOGGED TABLE cmdbus.hosts (
                id uuid PRIMARY KEY,
                hostname text NOT NULL,
                pid int NOT NULL,
                commands text[] NOT NULL,
                catalog jsonb NOT NULL DEFAULT '{}',
                started_at timestamptz NOT NULL DEFAULT now(),
                heartbeat_at timestamptz NOT NULL DEFAULT now(),
                lease_ms bigint NOT NULL,
                draining boolean NOT NULL DEFAULT false
            )
            """,
            """
            CREATE TABLE cmdbus.events (
                seq bigserial PRIMARY KEY,
                command_id uuid NOT NULL,
                correlation_id uuid NOT NULL,
                event jsonb NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            "CREATE INDEX events_correlation ON cmdbus.events (correlation_id, seq)",
        ],
        [
            // How far below its root a command is, so a tree that crosses hosts keeps its count
            // toward the depth limit. Adding a column with a constant default rewrites nothing.
            "ALTER TABLE cmdbus.commands ADD COLUMN depth int NOT NULL DEFAULT 0",
        ],
        [
            // Command names no host claims while they are here (`cmdbus bus pause`): what is
            // posted for them waits, pending, until `bus resume` takes the name out.
            """
            CREATE TABLE IF NOT EXISTS cmdbus.paused (
                name text PRIMARY KEY,
                paused_at timestamptz NOT NULL DEFAULT now(),
                paused_by text NOT NULL DEFAULT ''
            )
            """,
        ],
        [
            // How many commands of a name run at once across the bus (`cmdbus bus limit`): a
            // host claims one only while fewer run.
            """
            CREATE TABLE IF NOT EXISTS cmdbus.limits (
                name text PRIMARY KEY,
                max_running int NOT NULL CHECK (max_running > 0),
                set_at timestamptz NOT NULL DEFAULT now(),
                set_by text NOT NULL DEFAULT ''
            )
            """,
        ],
        [
            // Commands the hosts post on a schedule (`cmdbus bus periodic`): every `every_ms`, or at
            // the minutes `cron` names; `next_at` is the next slot, which the host that fires it moves on.
            """
            CREATE TABLE IF NOT EXISTS cmdbus.periodic (
                name text PRIMARY KEY,
                command text NOT NULL,
                payload bytea NOT NULL,
                every_ms bigint CHECK (every_ms > 0),
                cron text,
                no_overlap boolean NOT NULL DEFAULT false,
                timeout_ms bigint,
                priority int NOT NULL DEFAULT 0,
                max_attempts int CHECK (max_attempts > 0),
                next_at timestamptz NOT NULL,
                last_slot_at timestamptz,
                last_command_id uuid,
                last_fired_by text,
                fired bigint NOT NULL DEFAULT 0,
                skipped bigint NOT NULL DEFAULT 0,
                set_at timestamptz NOT NULL DEFAULT now(),
                set_by text NOT NULL DEFAULT '',
                CHECK ((every_ms IS NULL) <> (cron IS NULL))
            )
            """,
        ],
        [
            // How many commands of a name start in a period across the bus (`cmdbus bus limit
            // --rate`): `recent_starts` holds the latest starts, newest first, no more than
            // `rate_count`; a host claims one only while fewer than that started in the period.
            // A name may have a rate and no limit of how many run at once. Each statement may run
            // again on a schema that has what it adds (as the ones before create only what is not
            // there), so a migration cut short, or a schema put back by hand, migrates.
            "ALTER TABLE cmdbus.limits ALTER COLUMN max_running DROP NOT NULL",
            """
            ALTER TABLE cmdbus.limits
                ADD COLUMN IF NOT EXISTS rate_count int CHECK (rate_count > 0),
                ADD COLUMN IF NOT EXISTS rate_period_ms bigint CHECK (rate_period_ms > 0),
                ADD COLUMN IF NOT EXISTS recent_starts timestamptz[] NOT NULL DEFAULT '{}'
            """,
            """
            DO $$ BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'cmdbus.limits'::regclass AND conname = 'limits_rate_complete') THEN
                    ALTER TABLE cmdbus.limits ADD CONSTRAINT limits_rate_complete CHECK ((rate_count IS NULL) = (rate_period_ms IS NULL));
                END IF;
                IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'cmdbus.limits'::regclass AND conname = 'limits_has_a_limit') THEN
                    ALTER TABLE cmdbus.limits ADD CONSTRAINT limits_has_a_limit CHECK (max_running IS NOT NULL OR rate_count IS NOT NULL);
                END IF;
            END $$
            """,
            // A periodic entry paused (`bus periodic --pause`): it keeps its schedule and posts nothing.
            "ALTER TABLE cmdbus.periodic ADD COLUMN IF NOT EXISTS paused_at timestamptz, ADD COLUMN IF NOT EXISTS paused_by text",
        ],
        [
            // The dead letters, newest first (the dashboard's page, `journal list --state failed`):
            // few on a healthy bus, so without it a page of them read the whole table back to
            // front (0.6 s at 3 million commands, 40 of them failed). It holds only those
            // commands: one that succeeds never enters it. Built as the migration runs, holding
            // posts meanwhile (seconds on tens of millions); README says how to build it first.
            """
            CREATE INDEX IF NOT EXISTS commands_dead_letters ON cmdbus.commands (seq)
                WHERE state IN ('failed', 'cancelled', 'timedOut')
            """,
        ],
    ]

    /// The live hosts that handle one of `names` and run a `cmdbus` that reads a schema before
    /// `version` (their catalog's `busSchemaVersion`; none before version 3): they know nothing
    /// of what that version brought (a pause, a limit) and claim as before. As `hostname:pid`
    /// with the name, for a warning.
    package static func hosts(before version: Int, handling names: [String], on connection: PGConnection) throws(PGError) -> [(host: String, command: String)] {
        let rows = try connection.execute("""
            SELECT h.hostname, h.pid::int8 AS pid, n AS name FROM cmdbus.hosts h, unnest($1::text[]) n
            WHERE \(BusSQL.liveHost) AND n = ANY(h.commands) AND coalesce((h.catalog->>'busSchemaVersion')::int, 0) < $2::int4
            ORDER BY h.started_at, n
            """, [.textArray(names), .integer(version)])
        return rows.all.map { (BusHost.label(hostname: $0.text("hostname") ?? "?", pid: $0.integer("pid") ?? 0), $0.text("name") ?? "?") }
    }

    /// Creates or migrates the schema on `connection`.
    /// - Throws: A ``PGError`` if the database cannot be written, or its schema is newer than this binary.
    package static func migrate(_ connection: PGConnection) throws(PGError) {
        // The common case, without the lock: already at this version.
        let exists = try connection.execute("SELECT to_regclass('cmdbus.schema_version') IS NOT NULL AS present")
        if exists.count > 0, exists[row: 0].bool("present") == true {
            let present = try connection.execute("SELECT coalesce(max(version), 0)::int8 AS version FROM cmdbus.schema_version")
            if present.count > 0, present[row: 0].integer("version") == Int64(version) { return }
        }
        try connection.transaction { () throws(PGError) in
            try connection.execute("SELECT pg_advisory_xact_lock(hashtext('cmdbus.schema'))")
            try connection.execute("CREATE SCHEMA IF NOT EXISTS cmdbus")
            try connection.execute("CREATE TABLE IF NOT EXISTS cmdbus.schema_version (version int NOT NULL)")
            let rows = try connection.execute("SELECT version::int8 AS version FROM cmdbus.schema_version")
            let current = rows.count > 0 ? Int(rows[row: 0].integer("version") ?? 0) : 0
            if current > version {
                throw PGError(
                    .statementFailed,
                    "the bus at \(connection.redactedURL) has schema version \(current), newer than this cmdbus (\(version)); upgrade cmdbus"
                )
            }
            guard current < version else { return }
            for migration in migrations[current...] {
                for statement in migration { try connection.execute(statement) }
            }
            try connection.execute("DELETE FROM cmdbus.schema_version")
            try connection.execute("INSERT INTO cmdbus.schema_version (version) VALUES ($1::int4)", [.integer(version)])
        }
    }
}
