import CommandBus
import CommandBusSupport

/// Running again every dead letter of a name on the bus (`cmdbus bus retry`), as a job queue's
/// "retry all": after an outage of something the handlers call, the commands that failed for
/// it go back to pending together, in one statement, with their attempts counted from 0.
///
/// Only commands sent or posted on their own (roots) are retried: a subcommand runs again when
/// its parent, retried, sends it again.
package enum BusRetry {
    /// The final states a retry takes back by default: the dead letters.
    package static let deadLetterStates: [CommandState] = [.failed, .timedOut]
    /// The final states a retry may take back.
    package static let retryableStates: [CommandState] = [.failed, .timedOut, .cancelled]

    /// What retrying did to one name.
    package struct Outcome: Sendable, Equatable {
        /// The command name.
        package var name: String
        /// Its commands now pending again.
        package var retried: Int

        /// As `bus retry --json` prints it.
        package var json: JSONValue { .object(["command": .string(name), "retried": .integer(Int64(retried))]) }
    }

    /// The commands a retry takes back: roots of a wanted name ($1, through `wanted w`) that ended
    /// in one of the states $2, within $3 ms of now if given.
    private static let endedRoots = """
        cmdbus.commands c JOIN wanted w ON c.name = w.name
        WHERE c.state = ANY($2::text[]) AND c.parent_id IS NULL AND c.kind = 'command'
            AND ($3::int8 IS NULL OR c.finalized_at >= now() - $3::int8 * interval '1 millisecond')
        """

    /// Puts back to pending the root commands of `names` that ended in one of `states`, those
    /// that ended within `within` of now if given, and wakes the hosts that handle them.
    package static func retry(_ names: [String], states: [CommandState], within: Duration?, on connection: PGConnection) throws(PGError) -> [Outcome] {
        let rows = try connection.execute("""
            WITH wanted AS (SELECT DISTINCT unnest($1::text[]) AS name),
            held AS (
                \(BusSQL.lockedInIDOrder(endedRoots))
            ), again AS (
                UPDATE cmdbus.commands c SET state = 'pending', finalized_at = NULL, result = NULL, error_code = NULL, error_message = NULL,
                    attempt = 0, declined_by = '{}', cancel_requested = false, run_at = now()
                FROM held WHERE c.id = held.id
                RETURNING c.name
            ), notified AS (
                SELECT pg_notify('cmdbus_new', name) FROM (SELECT DISTINCT name FROM again) ready
            )
            SELECT w.name, (SELECT count(*) FROM again a WHERE a.name = w.name)::int8 AS retried, (SELECT count(*) FROM notified)::int8 AS notified
            FROM wanted w ORDER BY w.name
            """, [.textArray(names), .textArray(states.map(\.rawValue)), within.map { .integer($0.milliseconds) }])
        return rows.all.map { Outcome(name: $0.text("name") ?? "?", retried: Int($0.integer("retried") ?? 0)) }
    }
}
