import CommandBus
import CommandBusSupport
#if canImport(Glibc)
import Glibc
#endif

/// Pausing command names on the shared bus (`cmdbus bus pause` and `resume`, the dashboard's
/// queue buttons): while a name is paused no host claims it, so what is posted for it waits,
/// pending, and what already runs finishes. For a service the handlers call that is down, or
/// a bad build to hold back while the hosts are upgraded. A `can` probe still gets an answer.
package enum BusPause {
    /// What pausing or resuming did to one name.
    package struct Change: Sendable, Equatable {
        /// The command name.
        package var name: String
        /// Whether it was paused (or resumed) now, rather than already.
        package var changed: Bool
        /// Its commands pending on the bus (due now or later), and running.
        package var pending: Int, running: Int

        /// What the change did, as JSON (`bus pause --json`, the dashboard).
        package var json: JSONValue {
            .object(["command": .string(name), "changed": .bool(changed), "pending": .integer(Int64(pending)), "running": .integer(Int64(running))])
        }
    }

    /// Pauses `names`; `by` says who, in `bus status`.
    package static func pause(_ names: [String], by: String, on connection: PGConnection) throws(PGError) -> [Change] {
        try changes(connection.execute("""
            WITH wanted AS (SELECT DISTINCT unnest($1::text[]) AS name),
            added AS (
                INSERT INTO cmdbus.paused (name, paused_by) SELECT name, $2 FROM wanted ON CONFLICT (name) DO NOTHING RETURNING name
            )
            SELECT w.name, a.name IS NOT NULL AS changed, \(counts)
            FROM wanted w LEFT JOIN added a ON a.name = w.name ORDER BY w.name
            """, [.textArray(names), .text(by)]))
    }

    /// Resumes `names`, and wakes the hosts that handle them.
    package static func resume(_ names: [String], on connection: PGConnection) throws(PGError) -> [Change] {
        let changes = try changes(connection.execute("""
            WITH wanted AS (SELECT DISTINCT unnest($1::text[]) AS name),
            removed AS (DELETE FROM cmdbus.paused p USING wanted w WHERE p.name = w.name RETURNING p.name)
            SELECT w.name, r.name IS NOT NULL AS changed, \(counts)
            FROM wanted w LEFT JOIN removed r ON r.name = w.name ORDER BY w.name
            """, [.textArray(names)]))
        let resumed = changes.filter(\.changed).map(\.name)
        if !resumed.isEmpty {
            // As a post does: the hosts that handle a name hear of it at once, not at their next poll.
            try connection.execute(BusSQL.wakeHosts, [.textArray(resumed)])
        }
        return changes
    }

    /// The schema version that brought pauses: a host whose catalog names an older one (or none)
    /// claims a paused name all the same.
    static let schemaVersion = 3

    /// Pauses `names` (``pause(_:by:on:)``) or resumes them (``resume(_:on:)``).
    package static func set(_ names: [String], paused: Bool, by: String, on connection: PGConnection) throws(PGError) -> [Change] {
        paused ? try pause(names, by: by, on: connection) : try resume(names, on: connection)
    }

    /// The live hosts that handle one of `names` and run a `cmdbus` from before pauses: they
    /// claim a paused name all the same. As `hostname:pid` with the name, for a warning.
    package static func unawareHosts(handling names: [String], on connection: PGConnection) throws(PGError) -> [(host: String, command: String)] {
        try BusSchema.hosts(before: schemaVersion, handling: names, on: connection)
    }

    /// Every name `bus pause --all` pauses (`paused`: the names the live hosts handle, and those
    /// with commands waiting or running) or `bus resume --all` resumes (the paused ones), sorted.
    package static func allNames(toPause paused: Bool, on connection: PGConnection) throws(PGError) -> [String] {
        let rows = try connection.execute(paused ? """
            SELECT DISTINCT name FROM (
                SELECT unnest(h.commands) AS name FROM cmdbus.hosts h WHERE \(BusSQL.liveHost)
                UNION SELECT DISTINCT name FROM cmdbus.commands WHERE state IN ('pending', 'running') AND kind = 'command'
            ) names ORDER BY name
            """ : "SELECT name FROM cmdbus.paused ORDER BY name")
        return rows.all.compactMap { $0.text("name") }
    }

    /// The paused names, oldest pause first, as `bus status` shows them.
    package static func paused(on connection: PGConnection) throws(PGError) -> JSONValue {
        let rows = try connection.execute("""
            SELECT name, paused_by, EXTRACT(EPOCH FROM now() - paused_at)::float8 AS seconds FROM cmdbus.paused ORDER BY paused_at, name
            """)
        return .array(rows.all.map { row in
            .object([
                "command": .string(row.text("name") ?? "?"), "pausedBy": .string(row.text("paused_by") ?? ""),
                "pausedSeconds": .number(row.double("seconds") ?? 0),
            ])
        })
    }

    /// Who pauses, for the record: the user and the machine (`ada@build1`).
    package static var operatorLabel: String {
        let user = getenv("USER").map { String(cString: $0) } ?? getpwuid(getuid()).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "?"
        return "\(user)@\(BusHost.hostname())"
    }

    private static let counts = """
        (SELECT count(*) FROM cmdbus.commands c WHERE c.state = 'pending' AND c.name = w.name AND c.kind = 'command')::int8 AS pending,
        (SELECT count(*) FROM cmdbus.commands c WHERE c.state = 'running' AND c.name = w.name AND c.kind = 'command')::int8 AS running
        """

    private static func changes(_ rows: PGRows) -> [Change] {
        rows.all.map { row in
            Change(name: row.text("name") ?? "?", changed: row.bool("changed") ?? false, pending: Int(row.integer("pending") ?? 0), running: Int(row.integer("running") ?? 0))
        }
    }
}
