import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How hosts fire the periodic commands: the next entry due, and each due entry posted once
/// across the bus and moved to its next slot.
extension BusPeriodic {
    /// Milliseconds until the earliest entry is due (0 or less: due now); `nil` with no entry.
    static func millisecondsUntilDue(on connection: PGConnection) throws(PGError) -> Int64? {
        let rows = try connection.execute("""
            SELECT (EXTRACT(EPOCH FROM min(next_at) - now()) * 1000)::int8 AS due FROM cmdbus.periodic WHERE paused_at IS NULL
            """)
        return rows.count > 0 ? rows[row: 0].integer("due") : nil
    }

    /// What a host did with one due entry.
    struct Firing: Sendable {
        var name: String, command: String
        /// The command posted, or `nil` if the slot was skipped because the last run goes on.
        var posted: UUID?
        /// Slots passed over besides the one fired (no host was live for them).
        var missed: Int64
    }

    /// Posts a command for each due entry no other host is firing now, and moves the entries
    /// to their next slot, in one transaction; `host` is the poster's label.
    static func fireDue(host: String, on connection: PGConnection) throws(PGError) -> [Firing] {
        try connection.transaction { () throws(PGError) -> [Firing] in
            let due = try connection.execute("""
                SELECT \(submissionColumns), p.every_ms, p.cron, p.no_overlap,
                    (EXTRACT(EPOCH FROM p.next_at) * 1000)::int8 AS next_ms, (EXTRACT(EPOCH FROM now()) * 1000)::int8 AS now_ms,
                    (SELECT c.state FROM cmdbus.commands c WHERE c.id = p.last_command_id) AS last_state
                FROM cmdbus.periodic p WHERE p.next_at <= now() AND p.paused_at IS NULL ORDER BY p.next_at LIMIT 100 FOR UPDATE OF p SKIP LOCKED
                """)
            var firings: [Firing] = []
            for row in due.all {
                guard let name = row.text("name"), let command = row.text("command"), let slot = row.integer("next_ms"), let now = row.integer("now_ms") else { continue }
                // An entry this host cannot read (written by a newer cmdbus) waits a minute, for a host that can.
                guard let recurrence = recurrence(of: row) else {
                    try advance(name, to: now + 60_000, slot: nil, posted: nil, skipped: 0, host: host, on: connection)
                    continue
                }
                // The latest slot due, and how many before it were missed.
                var latest = slot, missed: Int64 = 0
                let next = recurrence.next(after: now, from: slot) ?? now + 60_000
                if case .every(let interval) = recurrence {
                    missed = (now - slot) / interval
                    latest = slot + missed * interval
                } else {
                    while missed < 10_000, let after = recurrence.next(after: latest, from: latest), after <= now {
                        latest = after
                        missed += 1
                    }
                }
                let running = ["pending", "running"].contains(row.text("last_state") ?? "")
                var posted: UUID?
                if !(row.bool("no_overlap") == true && running) {
                    var submission = submission(of: row, name: name, command: command, slot: latest)
                    submission.idempotencyKey = "cmdbus.periodic:\(name):\(latest)"
                    posted = try submission.submit(on: connection).id
                }
                try advance(name, to: next, slot: latest, posted: posted, skipped: posted == nil ? missed + 1 : missed, host: host, on: connection)
                firings.append(Firing(name: name, command: command, posted: posted, missed: missed))
            }
            return firings
        }
    }

    /// Moves entry `name` to its next slot `next`, recording the slot fired, the command posted
    /// and the slots skipped, by `host`.
    private static func advance(
        _ name: String, to next: Int64, slot: Int64?, posted: UUID?, skipped: Int64, host: String, on connection: PGConnection
    ) throws(PGError) {
        try connection.execute("""
            UPDATE cmdbus.periodic SET next_at = \(timestamp("$2")),
                last_slot_at = CASE WHEN $4::uuid IS NULL THEN last_slot_at ELSE \(timestamp("$3")) END,
                last_command_id = coalesce($4::uuid, last_command_id), last_fired_by = CASE WHEN $4::uuid IS NULL THEN last_fired_by ELSE $6 END,
                fired = fired + CASE WHEN $4::uuid IS NULL THEN 0 ELSE 1 END, skipped = skipped + $5::int8
            WHERE name = $1
            """, [.text(name), .integer(next), slot.map { .integer($0) }, posted.map(PGValue.uuid), .integer(skipped), .text(host)])
    }
}
