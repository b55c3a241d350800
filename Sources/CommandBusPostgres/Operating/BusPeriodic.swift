import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Commands the bus posts on a schedule (`cmdbus bus periodic`): every so long, or at the
/// minutes a cron expression names (UTC), as a job queue's periodic jobs.
///
/// Each entry is a row of `cmdbus.periodic` with the time its next run is due (`next_at`). Every
/// live host looks for due rows (when the earliest is due, as it last read it, and every few
/// seconds), and fires them in a transaction that takes the rows with `FOR UPDATE SKIP LOCKED`,
/// posts a command for each and moves `next_at` past now: whichever host gets there first posts
/// it, once, and the others find nothing due. The command carries the idempotency key
/// `cmdbus.periodic:NAME:SLOT` besides, so even a row written back by hand cannot post one slot
/// twice. Its run is claimed like any post's, by a host whose plugins handle it.
///
/// A slot that passed while no host was live (or while the previous run was still going, with
/// `noOverlap`) is skipped, not caught up: a host that comes back after a night posts one
/// command, for the latest slot, and counts the rest as skipped.
///
/// A paused entry (`paused_at`) keeps its schedule and posts nothing; resumed, it goes on from
/// its next slot after now, the slots it was paused for neither posted nor counted as skipped.
package enum BusPeriodic {
    /// The schema version that brought periodic commands: hosts of an older `cmdbus` post none.
    static let schemaVersion = 5
    /// The schema version that brought pausing an entry: hosts of an older `cmdbus` post a
    /// paused entry all the same.
    static let pauseSchemaVersion = 6

    /// How often an entry runs.
    package enum Recurrence: Sendable, Equatable {
        /// Every so long, from when the entry was set.
        case every(milliseconds: Int64)
        /// At each minute a cron expression names.
        case cron(CronSchedule)

        /// The first slot after `now` (milliseconds since 1970): for `every`, the first of
        /// `from`, `from` + interval, … past `now`; for a cron expression, its next minute.
        package func next(after now: Int64, from: Int64) -> Int64? {
            switch self {
            case .every(let interval):
                guard from <= now else { return from }
                return from + ((now - from) / interval + 1) * interval
            case .cron(let schedule):
                return schedule.next(after: CronSchedule.floorDivide(now, 1000)).map { $0 * 1000 }
            }
        }

        /// As people write it: `every 5m`, `cron '0 3 * * *' (UTC)`.
        package var description: String {
            switch self {
            case .every(let interval): "every \(Self.interval(interval))"
            case .cron(let schedule): "cron \(quoted(schedule.expression)) (\(schedule.zoneName))"
            }
        }

        /// An interval in its largest whole unit: `90s` stays `90s`, `3600000` ms is `1h`.
        package static func interval(_ milliseconds: Int64) -> String {
            let units: [(Int64, String)] = [(604_800_000, "w"), (86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1000, "s")]
            for (size, unit) in units where milliseconds % size == 0 { return "\(milliseconds / size)\(unit)" }
            return "\(milliseconds)ms"
        }
    }

    /// One periodic command, as `bus periodic` sets it.
    package struct Entry: Sendable {
        /// The entry's own name (the command's, unless given): what `--remove` takes.
        package var name: String
        /// The command it posts, and its payload.
        package var command: String
        package var payload: Data
        package var recurrence: Recurrence
        /// Skip a slot while the command posted for the one before is still pending or running.
        package var noOverlap = false
        /// Each posted command's timeout.
        package var timeout: Duration?
        /// Each posted command's priority (``BusSubmission/priority``).
        package var priority = 0
        /// How many times the bus runs each posted command at most; `nil` for the default.
        package var maxAttempts: Int?

        package init(name: String, command: String, payload: Data, recurrence: Recurrence) {
            self.name = name
            self.command = command
            self.payload = payload
            self.recurrence = recurrence
        }
    }

    /// What setting an entry did.
    package struct Change: Sendable {
        /// Whether an entry of that name was there before (it is replaced), and whether its
        /// schedule was the same (its next slot is kept, so setting it again at each deploy never
        /// puts a run off).
        package var replaced: Bool, sameSchedule: Bool
        /// Whether the entry replaced was paused: it stays so.
        package var paused = false
        /// Seconds until the next run is due.
        package var nextDueSeconds: Double
    }

    /// Sets `entry` (replacing one of its name); `by` says who, in `bus periodic`. Tells the hosts.
    package static func set(_ entry: Entry, by: String, on connection: PGConnection) throws(PGError) -> Change {
        try connection.transaction { () throws(PGError) -> Change in
            let clock = try connection.execute("SELECT (EXTRACT(EPOCH FROM now()) * 1000)::int8 AS now_ms")
            let now = clock.count > 0 ? clock[row: 0].integer("now_ms") ?? 0 : 0
            let existing = try connection.execute("""
                SELECT every_ms, cron, (EXTRACT(EPOCH FROM next_at) * 1000)::int8 AS next_ms, paused_at IS NOT NULL AS paused
                FROM cmdbus.periodic WHERE name = $1 FOR UPDATE
                """, [.text(entry.name)])
            let row = existing.count > 0 ? existing[row: 0] : nil
            let before = row.flatMap(recurrence(of:))
            let same = before == entry.recurrence
            let next: Int64
            if same, let kept = row?.integer("next_ms") {
                next = kept
            } else if case .every(let interval) = entry.recurrence {
                next = now + interval
            } else {
                next = entry.recurrence.next(after: now, from: now) ?? now
            }
            var every: PGValue?, cron: PGValue?
            switch entry.recurrence {
            case .every(let interval): every = .integer(interval)
            case .cron(let schedule): cron = .text(schedule.text)
            }
            try connection.execute("""
                INSERT INTO cmdbus.periodic AS p (name, command, payload, every_ms, cron, no_overlap, timeout_ms, next_at, set_by, priority, max_attempts)
                VALUES ($1, $2, $3, $4, $5, $6::bool, $7, \(timestamp("$8")), $9, $10::int4, $11::int4)
                ON CONFLICT (name) DO UPDATE SET command = excluded.command, payload = excluded.payload, every_ms = excluded.every_ms,
                    cron = excluded.cron, no_overlap = excluded.no_overlap, timeout_ms = excluded.timeout_ms, priority = excluded.priority,
                    max_attempts = excluded.max_attempts,
                    next_at = excluded.next_at, set_at = now(), set_by = excluded.set_by
                """, [
                    .text(entry.name), .text(entry.command), .bytes(entry.payload), every, cron, .bool(entry.noOverlap),
                    entry.timeout.map { .integer($0.milliseconds) }, .integer(next), .text(by), .integer(entry.priority),
                    entry.maxAttempts.map { .integer($0) },
                ])
            try connection.execute("SELECT pg_notify('cmdbus_periodic', '')")
            return Change(replaced: row != nil, sameSchedule: same, paused: row?.bool("paused") ?? false, nextDueSeconds: Double(next - now) / 1000)
        }
    }

    /// What pausing, resuming or running one entry now did.
    package struct Action: Sendable, Equatable {
        /// The entry's name, and whether there is one of that name.
        package var name: String, found: Bool
        /// Whether it was paused before, and is now.
        package var wasPaused: Bool, paused: Bool
        /// Seconds until its next slot (past the pause, once resumed).
        package var nextDueSeconds: Double
        /// The command posted now (``runNow(_:by:on:)``).
        package var posted: UUID?

        /// What acting on `name` did where there is no entry of that name.
        static func missing(_ name: String) -> Self {
            Action(name: name, found: false, wasPaused: false, paused: false, nextDueSeconds: 0)
        }

        /// As `bus periodic --json` and the dashboard's API write it.
        package var json: JSONValue {
            var fields: [String: JSONValue] = [
                "name": .string(name), "found": .bool(found), "paused": .bool(paused), "wasPaused": .bool(wasPaused),
                "nextDueSeconds": .number(nextDueSeconds),
            ]
            if let posted { fields["posted"] = .string(posted.uuidString) }
            return .object(fields)
        }
    }

    /// Pauses the entries of `names` (`paused`), or resumes them; `by` says who. A resumed entry
    /// goes on from its next slot after now (an interval's keeps its grid). Tells the hosts.
    package static func setPaused(_ names: [String], paused: Bool, by: String, on connection: PGConnection) throws(PGError) -> [Action] {
        try connection.transaction { () throws(PGError) -> [Action] in
            let rows = try connection.execute("""
                SELECT name, every_ms, cron, paused_at IS NOT NULL AS paused, (EXTRACT(EPOCH FROM next_at) * 1000)::int8 AS next_ms,
                    (EXTRACT(EPOCH FROM now()) * 1000)::int8 AS now_ms
                FROM cmdbus.periodic WHERE name = ANY($1::text[]) FOR UPDATE
                """, [.textArray(names)])
            var actions: [String: Action] = [:]
            for row in rows.all {
                guard let name = row.text("name"), let slot = row.integer("next_ms"), let now = row.integer("now_ms") else { continue }
                let was = row.bool("paused") ?? false
                var next = slot
                if was, !paused {
                    next = recurrence(of: row)?.next(after: now, from: slot) ?? now + 60_000
                    try connection.execute("""
                        UPDATE cmdbus.periodic SET paused_at = NULL, paused_by = NULL, next_at = \(timestamp("$2")) WHERE name = $1
                        """, [.text(name), .integer(next)])
                } else if !was, paused {
                    try connection.execute("UPDATE cmdbus.periodic SET paused_at = now(), paused_by = $2 WHERE name = $1", [.text(name), .text(by)])
                }
                actions[name] = Action(name: name, found: true, wasPaused: was, paused: paused, nextDueSeconds: Double(next - now) / 1000)
            }
            try connection.execute("SELECT pg_notify('cmdbus_periodic', '')")
            return names.map { actions[$0] ?? .missing($0) }
        }
    }

    /// Posts the command of each entry of `names` now, once, apart from its schedule (its next
    /// slot stands, paused or not); it counts as the entry's last run. `by` says who.
    package static func runNow(_ names: [String], by: String, on connection: PGConnection) throws(PGError) -> [Action] {
        try connection.transaction { () throws(PGError) -> [Action] in
            let rows = try connection.execute("""
                SELECT \(submissionColumns), p.paused_at IS NOT NULL AS paused, EXTRACT(EPOCH FROM p.next_at - now())::float8 AS next_due,
                    (EXTRACT(EPOCH FROM now()) * 1000)::int8 AS now_ms
                FROM cmdbus.periodic p WHERE p.name = ANY($1::text[]) FOR UPDATE
                """, [.textArray(names)])
            var actions: [String: Action] = [:]
            for row in rows.all {
                guard let name = row.text("name"), let command = row.text("command"), let now = row.integer("now_ms") else { continue }
                var submission = submission(of: row, name: name, command: command, slot: now)
                submission.metadata["cmdbus.postedBy"] = by
                let posted = try submission.submit(on: connection).id
                try connection.execute("""
                    UPDATE cmdbus.periodic SET last_slot_at = \(timestamp("$2")), last_command_id = $3, last_fired_by = $4, fired = fired + 1
                    WHERE name = $1
                    """, [.text(name), .integer(now), .uuid(posted), .text(by)])
                let paused = row.bool("paused") ?? false
                actions[name] = Action(name: name, found: true, wasPaused: paused, paused: paused, nextDueSeconds: row.double("next_due") ?? 0, posted: posted)
            }
            return names.map { actions[$0] ?? .missing($0) }
        }
    }

    /// The live hosts that run a `cmdbus` from before `version` and post periodic commands (from
    /// version 5), as `hostname:pid`: they post a paused entry all the same.
    package static func hosts(before version: Int, on connection: PGConnection) throws(PGError) -> [String] {
        try connection.execute("""
            SELECT h.hostname, h.pid::int8 AS pid FROM cmdbus.hosts h
            WHERE \(BusSQL.liveHost) AND coalesce((h.catalog->>'busSchemaVersion')::int, 0) BETWEEN $1::int4 AND $2::int4 - 1
            ORDER BY h.started_at
            """, [.integer(schemaVersion), .integer(version)]).all.map { BusHost.label(hostname: $0.text("hostname") ?? "?", pid: $0.integer("pid") ?? 0) }
    }

    /// Removes the entries of `names`; returns the names that were there.
    package static func remove(_ names: [String], on connection: PGConnection) throws(PGError) -> [String] {
        let rows = try connection.execute("DELETE FROM cmdbus.periodic WHERE name = ANY($1::text[]) RETURNING name", [.textArray(names)])
        try connection.execute("SELECT pg_notify('cmdbus_periodic', '')")
        return rows.all.compactMap { $0.text("name") }
    }

    /// The largest payload the entries' JSON carries: a status read every few seconds (the
    /// dashboard, `/metrics`) should not carry a payload of megabytes each time.
    static let payloadShownAtMost = 4096

    /// The entries, by name, as `bus periodic` and `bus status` show them: each payload up to
    /// ``payloadShownAtMost`` bytes, and past that its size (`payloadBytes`).
    package static func entries(on connection: PGConnection) throws(PGError) -> JSONValue {
        let rows = try connection.execute("""
            SELECT p.name, p.command, CASE WHEN octet_length(p.payload) <= $1 THEN p.payload END AS payload,
                octet_length(p.payload)::int8 AS payload_bytes, p.every_ms, p.cron, p.no_overlap, p.timeout_ms, p.priority::int8 AS priority, p.max_attempts::int8 AS max_attempts, p.fired, p.skipped,
                p.set_by, p.last_fired_by,
                EXTRACT(EPOCH FROM p.next_at - now())::float8 AS next_due, EXTRACT(EPOCH FROM now() - p.last_slot_at)::float8 AS last_ago,
                EXTRACT(EPOCH FROM now() - p.set_at)::float8 AS set_ago, p.last_command_id, c.state AS last_state,
                EXTRACT(EPOCH FROM now() - p.paused_at)::float8 AS paused_ago, p.paused_by
            FROM cmdbus.periodic p LEFT JOIN cmdbus.commands c ON c.id = p.last_command_id
            ORDER BY p.name
            """, [.integer(payloadShownAtMost)])
        return .array(rows.all.map { row in
            var entry: [String: JSONValue] = [
                "name": .string(row.text("name") ?? "?"), "command": .string(row.text("command") ?? "?"),
                "noOverlap": .bool(row.bool("no_overlap") ?? false), "nextDueSeconds": .number(row.double("next_due") ?? 0),
                "fired": .integer(row.integer("fired") ?? 0), "skipped": .integer(row.integer("skipped") ?? 0),
                "setBy": .string(row.text("set_by") ?? ""), "setSeconds": .number(row.double("set_ago") ?? 0),
            ]
            if let payload = row.bytes("payload") {
                entry["payload"] = JSONValue.parse(String(decoding: payload, as: UTF8.self)) ?? .string(payload.base64EncodedString())
            } else {
                entry["payloadBytes"] = .integer(row.integer("payload_bytes") ?? 0)
            }
            if let every = row.integer("every_ms") { entry["every"] = .string(Recurrence.interval(every)); entry["everySeconds"] = .number(Double(every) / 1000) }
            if let cron = row.text("cron") {
                // The fields and the zone apart; as written where this cmdbus cannot read it.
                let schedule = try? CronSchedule(parsing: cron)
                entry["cron"] = .string(schedule?.expression ?? cron)
                entry["timeZone"] = .string(schedule?.zoneName ?? "?")
            }
            if let timeout = row.integer("timeout_ms") { entry["timeoutSeconds"] = .number(Double(timeout) / 1000) }
            if let priority = row.integer("priority"), priority != 0 { entry["priority"] = .integer(priority) }
            if let attempts = row.integer("max_attempts") { entry["maxAttempts"] = .integer(attempts) }
            if let ago = row.double("last_ago") { entry["lastSlotSecondsAgo"] = .number(ago) }
            if let id = row.uuid("last_command_id") { entry["lastCommand"] = .string(id.uuidString) }
            if let state = row.text("last_state") { entry["lastState"] = .string(state) }
            if let host = row.text("last_fired_by") { entry["lastFiredBy"] = .string(host) }
            if let ago = row.double("paused_ago") {
                entry["paused"] = .bool(true)
                entry["pausedSeconds"] = .number(ago)
                entry["pausedBy"] = .string(row.text("paused_by") ?? "")
            }
            return .object(entry)
        })
    }

    /// How many live hosts post periodic commands (run a `cmdbus` that knows them).
    package static func firingHosts(on connection: PGConnection) throws(PGError) -> Int {
        let rows = try connection.execute("""
            SELECT count(*)::int8 AS hosts FROM cmdbus.hosts h
            WHERE \(BusSQL.liveHost) AND coalesce((h.catalog->>'busSchemaVersion')::int, 0) >= $1::int4
            """, [.integer(schemaVersion)])
        return Int(rows.count > 0 ? rows[row: 0].integer("hosts") ?? 0 : 0)
    }

    /// The columns of `cmdbus.periodic` (as `p`) that ``submission(of:name:command:slot:)`` reads.
    static let submissionColumns = """
        p.name, p.command, p.payload, p.timeout_ms, p.priority::int8 AS priority, p.max_attempts::int8 AS max_attempts
        """

    /// The command an entry's row posts for `slot` (milliseconds since 1970), as its metadata
    /// says: `cmdbus.periodic` the entry, `cmdbus.slot` the slot.
    static func submission(of row: PGRow, name: String, command: String, slot: Int64) -> BusSubmission {
        var submission = BusSubmission(name: command, payload: row.bytes("payload") ?? Data(), metadata: [
            "cmdbus.periodic": name, "cmdbus.slot": Date(timeIntervalSince1970: Double(slot) / 1000).timestamp,
        ])
        submission.failIfUnhandled = false
        submission.timeout = row.integer("timeout_ms").map { .milliseconds($0) }
        submission.priority = Int(row.integer("priority") ?? 0)
        if let attempts = row.integer("max_attempts") { submission.maxAttempts = Int(attempts) }
        return submission
    }

    /// The recurrence a row of `cmdbus.periodic` holds; `nil` for a cron expression this
    /// `cmdbus` cannot read.
    static func recurrence(of row: PGRow) -> Recurrence? {
        if let every = row.integer("every_ms") { return .every(milliseconds: every) }
        return row.text("cron").flatMap { try? CronSchedule(parsing: $0) }.map(Recurrence.cron)
    }

    /// A time given as milliseconds since 1970 in parameter `parameter`.
    static func timestamp(_ parameter: String) -> String {
        "(timestamptz 'epoch' + \(parameter)::int8 * interval '1 millisecond')"
    }
}
