import CommandBus
import CommandBusSupport

/// Limiting how many commands of a name run at once across the whole bus (`cmdbus bus limit`):
/// a host claims one only while fewer than the limit run, on every host together. For a
/// service that takes so many calls at once, or work that must run one at a time (a limit of
/// 1), whichever host claims it. A handler's own `maxConcurrency` limits it on each host; this
/// limits the bus.
///
/// A host that handles a limited name takes a lock for it (an advisory lock per name) around
/// its claim, so two hosts claiming at once cannot both see room for the last one. A host
/// learns of limits from the `cmdbus_limit` notification (and reads them again every few
/// seconds); one that has not yet heard of a limit claims nothing of that name, since its claim
/// counts only the names it took the lock for.
package enum BusLimit {
    /// The schema version that brought limits: a host whose catalog names an older one (or none)
    /// claims a limited name as many at once as it likes.
    static let schemaVersion = 4

    /// What setting or removing a limit did to one name.
    package struct Change: Sendable, Equatable {
        /// The command name.
        package var name: String
        /// The limit before, and now (`nil`: none).
        package var before: Int?, after: Int?
        /// Its commands pending on the bus (due now or later), and running.
        package var pending: Int, running: Int

        /// What the change did, as JSON (`bus limit --json`).
        package var json: JSONValue {
            .object([
                "command": .string(name), "before": before.map { .integer(Int64($0)) } ?? .null,
                "limit": after.map { .integer(Int64($0)) } ?? .null, "pending": .integer(Int64(pending)), "running": .integer(Int64(running)),
            ])
        }
    }

    /// Sets the limit of `names` to `limit` (at least 1), or removes it (`nil`); `by` says who,
    /// in `bus status`. Wakes the hosts: they read the limits again and claim at once.
    package static func set(_ names: [String], to limit: Int?, by: String, on connection: PGConnection) throws(PGError) -> [Change] {
        let rows = try connection.execute("""
            WITH wanted AS (SELECT DISTINCT unnest($1::text[]) AS name),
            before AS (SELECT l.name, l.max_running FROM cmdbus.limits l JOIN wanted w ON w.name = l.name),
            removed AS (DELETE FROM cmdbus.limits l USING wanted w WHERE $2::int4 IS NULL AND l.name = w.name RETURNING l.name),
            written AS (
                INSERT INTO cmdbus.limits (name, max_running, set_by) SELECT name, $2::int4, $3 FROM wanted WHERE $2::int4 IS NOT NULL
                ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running, set_at = now(), set_by = excluded.set_by
                RETURNING name
            )
            SELECT w.name, b.max_running::int8 AS before, (SELECT count(*) FROM removed) + (SELECT count(*) FROM written) AS touched,
                (SELECT count(*) FROM cmdbus.commands c WHERE c.state = 'pending' AND c.name = w.name AND c.kind = 'command')::int8 AS pending,
                (SELECT count(*) FROM cmdbus.commands c WHERE c.state = 'running' AND c.name = w.name AND c.kind = 'command')::int8 AS running
            FROM wanted w LEFT JOIN before b ON b.name = w.name ORDER BY w.name
            """, [.textArray(names), limit.map { .integer($0) }, .text(by)])
        try connection.execute("SELECT pg_notify('cmdbus_limit', '')")
        try connection.execute(BusSQL.wakeHosts, [.textArray(names)])
        return rows.all.map { row in
            Change(
                name: row.text("name") ?? "?", before: row.integer("before").map(Int.init), after: limit,
                pending: Int(row.integer("pending") ?? 0), running: Int(row.integer("running") ?? 0)
            )
        }
    }

    /// The live hosts that handle one of `names` and run a `cmdbus` from before limits: they
    /// claim a limited name all the same. As `hostname:pid` with the name, for a warning.
    package static func unawareHosts(handling names: [String], on connection: PGConnection) throws(PGError) -> [(host: String, command: String)] {
        try BusSchema.hosts(before: schemaVersion, handling: names, on: connection)
    }

    /// The limited names, by name, as `bus status` shows them.
    package static func limits(on connection: PGConnection) throws(PGError) -> JSONValue {
        let rows = try connection.execute("""
            SELECT name, max_running::int8 AS max_running, set_by, EXTRACT(EPOCH FROM now() - set_at)::float8 AS seconds
            FROM cmdbus.limits ORDER BY name
            """)
        return .array(rows.all.map { row in
            .object([
                "command": .string(row.text("name") ?? "?"), "limit": .integer(row.integer("max_running") ?? 0),
                "setBy": .string(row.text("set_by") ?? ""), "setSeconds": .number(row.double("seconds") ?? 0),
            ])
        })
    }

    /// The names limited now, for a host's claimer.
    static func limitedNames(on connection: PGConnection) throws(PGError) -> Set<String> {
        Set(try connection.execute("SELECT name FROM cmdbus.limits").all.compactMap { $0.text("name") })
    }

    /// Takes the locks of `names` for the rest of the transaction, in one order, so claims of
    /// limited names on different hosts take turns (and never wait for each other in a circle).
    static let lock = """
        SELECT count(pg_advisory_xact_lock(k)) AS locked
        FROM (SELECT DISTINCT hashtext('cmdbus.limit:' || n) AS k FROM unnest($1::text[]) n ORDER BY 1) locks
        """
}
