import CommandBus
import CommandBusSupport

/// Cancelling every command of a name that waits on the bus (`cmdbus bus cancel`), as a job
/// queue clears a queue: after a flood of posts that should not run, or work no longer wanted.
/// What waits (pending, due now or later) ends `cancelled` at once, recorded with who cancelled
/// it; what runs finishes, unless `running` asks it to stop as `cmdbus cancel ID` does.
package enum BusCancel {
    /// What cancelling did to one name.
    package struct Outcome: Sendable, Equatable {
        /// The command name.
        package var name: String
        /// Its commands that waited, now cancelled.
        package var cancelled: Int
        /// Its commands running: asked to stop with `running`, else left to finish.
        package var running: Int

        /// As `bus cancel --json` prints it.
        package var json: JSONValue {
            .object(["command": .string(name), "cancelled": .integer(Int64(cancelled)), "running": .integer(Int64(running))])
        }
    }

    /// A waiting `run --bus` hears of its command's end by notification, or within a second by
    /// polling: a flood of cancellations notifies the first this many, and leaves the rest to that.
    static let notifiedAtMost = 1000

    /// Cancels the waiting commands of `names` (and, with `running`, asks the running ones to
    /// stop, with their subcommands); `by` says who, in each one's error message.
    package static func cancel(_ names: [String], running: Bool, by: String, on connection: PGConnection) throws(PGError) -> [Outcome] {
        let rows = try connection.execute("""
            WITH wanted AS (SELECT DISTINCT unnest($1::text[]) AS name),
            held AS (
                \(BusSQL.lockedInIDOrder("cmdbus.commands c JOIN wanted w ON c.name = w.name WHERE c.state = 'pending' AND c.kind = 'command'"))
            ), cancelled AS (
                UPDATE cmdbus.commands c SET cancel_requested = true, state = 'cancelled', finalized_at = now(), error_code = 'cancelled',
                    error_message = 'command ''' || c.name || ''' was cancelled while it waited, by ' || $2 || ' (cmdbus bus cancel)'
                FROM held WHERE c.id = held.id
                RETURNING c.id, c.name
            ), notified AS (
                SELECT pg_notify('cmdbus_done', id::text) FROM (SELECT id FROM cancelled LIMIT $3) first
            )
            SELECT w.name, (SELECT count(*) FROM cancelled x WHERE x.name = w.name)::int8 AS cancelled,
                (SELECT count(*) FROM cmdbus.commands c WHERE c.state = 'running' AND c.kind = 'command' AND c.name = w.name)::int8 AS running,
                (SELECT count(*) FROM notified)::int8 AS notified
            FROM wanted w ORDER BY w.name
            """, [.textArray(names), .text(by), .integer(notifiedAtMost)])
        if running {
            let ids = try connection.execute("""
                SELECT id FROM cmdbus.commands WHERE state = 'running' AND kind = 'command' AND name = ANY($1::text[])
                """, [.textArray(names)]).all.compactMap { $0.uuid("id") }
            // A statement per 500 trees: each holds its rows only while it runs.
            for chunk in stride(from: 0, to: ids.count, by: 500) {
                try connection.execute(BusSQL.cancel, [.uuidArray(Array(ids[chunk..<min(chunk + 500, ids.count)]))])
            }
        }
        return rows.all.map { row in
            Outcome(name: row.text("name") ?? "?", cancelled: Int(row.integer("cancelled") ?? 0), running: Int(row.integer("running") ?? 0))
        }
    }
}
