import CommandBus
import CommandBusSupport
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The shared bus as a journal: its commands are the entries `cmdbus journal … --bus` lists,
/// shows, retries and imports into.
package final class BusJournal: Sendable {
    let connections: PGConnectionPool
    /// Started by the first retry: a waiter holds a connection and a thread, which a dashboard
    /// or a pruning that never waits for a result should not.
    private let waiter: Mutex<ResultWaiter?> = Mutex(nil)
    private let url: String
    /// The bus's URL without its password, for messages.
    package let location: String

    /// The journal of the bus at `url` (its schema created or checked first).
    package convenience init(url: String) throws(PGError) {
        self.init(connectingWhenReadTo: url)
        try connections.with { connection throws(PGError) in try BusSchema.migrate(connection) }
    }

    /// The journal of the bus at `url`, connecting only when first read and leaving the schema
    /// alone: for a host's dashboard, which serves while the host waits for the bus (the host
    /// makes sure of the schema as it joins).
    package init(connectingWhenReadTo url: String) {
        connections = PGConnectionPool(url: url)
        location = PGURL.redacted(url)
        self.url = url
    }

    deinit { waiter.withLock { $0 }?.stop() }

    /// The waiter for results, started on first use.
    private var resultWaiter: ResultWaiter {
        waiter.withLock { waiter in
            if let waiter { return waiter }
            let started = ResultWaiter(url: url)
            waiter = started
            return started
        }
    }

    /// The bus's hosts, queues and oldest pending command, as `cmdbus bus status` reads them.
    package func status() throws(PGError) -> JSONValue {
        try connections.with { connection throws(PGError) in try BusStatus.read(on: connection) }
    }

    /// Pauses (or, with `false`, resumes) one command name, as the dashboard's queue buttons do;
    /// returns whether that changed it.
    package func setPaused(_ name: String, _ paused: Bool) throws(PGError) -> Bool {
        try connections.with { connection throws(PGError) in
            try BusPause.set([name], paused: paused, by: Self.dashboardOperator, on: connection)
        }.first?.changed ?? false
    }

    /// Cancels the commands of `name` that wait (``BusCancel``), from the dashboard; returns how many.
    package func cancelWaiting(_ name: String) throws(PGError) -> Int {
        try connections.with { connection throws(PGError) in
            try BusCancel.cancel([name], running: false, by: Self.dashboardOperator, on: connection)
        }.first?.cancelled ?? 0
    }

    /// Sets, keeps or removes the limits of one command name across the bus (``BusLimit``), from
    /// the dashboard.
    package func setLimit(_ name: String, atOnce: BusLimit.Setting<Int>, rate: BusLimit.Setting<BusLimit.Rate>) throws(PGError) -> BusLimit.Change {
        let changes = try connections.with { connection throws(PGError) in
            try BusLimit.set([name], atOnce: atOnce, rate: rate, by: Self.dashboardOperator, on: connection)
        }
        return changes.first ?? BusLimit.Change(name: name, before: nil, after: nil, rateBefore: nil, rateAfter: nil, pending: 0, running: 0)
    }

    /// Pauses (`true`) or resumes one periodic command, from the dashboard; `nil` if there is no
    /// entry of that name.
    package func setPeriodicPaused(_ name: String, _ paused: Bool) throws(PGError) -> BusPeriodic.Action? {
        let actions = try connections.with { connection throws(PGError) in
            try BusPeriodic.setPaused([name], paused: paused, by: Self.dashboardOperator, on: connection)
        }
        return actions.first.flatMap { $0.found ? $0 : nil }
    }

    /// Posts one periodic command's command now, from the dashboard; `nil` if there is no entry
    /// of that name.
    package func runPeriodicNow(_ name: String) throws(PGError) -> BusPeriodic.Action? {
        let actions = try connections.with { connection throws(PGError) in
            try BusPeriodic.runNow([name], by: Self.dashboardOperator, on: connection)
        }
        return actions.first.flatMap { $0.found ? $0 : nil }
    }

    /// Removes one periodic command (``BusPeriodic/remove(_:on:)``), from the dashboard; whether
    /// there was an entry of that name.
    package func removePeriodic(_ name: String) throws(PGError) -> Bool {
        try connections.with { connection throws(PGError) in try BusPeriodic.remove([name], on: connection) }.contains(name)
    }

    /// Who acts from the dashboard, for the record: the host's user and machine, and where.
    private static var dashboardOperator: String { BusPause.operatorLabel + " (dashboard)" }

    /// Removes the trees of work that ended before `cutoff`, as the file journal's `prune` does:
    /// each root in one of `rootStates` (any final state if empty) with every subcommand under it
    /// and their events, once all ended before `cutoff`; a thousand trees per statement.
    /// - Parameters:
    ///   - takingTurns: Skip a batch while another pruning with it runs (the hosts' `--keep`).
    ///   - dryRun: Only count what would be removed.
    /// - Returns: How many commands were removed (or would be).
    package func prune(
        endedBefore cutoff: Date, rootStates: Set<CommandState> = [], takingTurns: Bool = false, dryRun: Bool = false
    ) throws(PGError) -> Int {
        let finals = rootStates.isEmpty ? CommandState.allCases.filter(\.isTerminal) : Array(rootStates)
        let statement = BusSQL.prune(counting: dryRun)
        var after: Int64 = 0
        var total = 0
        while true {
            let row = try connections.with { connection throws(PGError) in
                try connection.execute(statement, [
                    .text(String(cutoff.timeIntervalSince1970)), .textArray(finals.map(\.rawValue)), .integer(after), .integer(1_000),
                    .bool(takingTurns),
                ]).all.first
            }
            total += Int(row?.integer("removed") ?? 0)
            guard let last = row?.integer("last_root") else { return total }
            after = last
        }
    }

    /// Commands matching `query`, oldest first (probes from `can` are not entries).
    package func rows(_ query: JournalQuery) throws(PGError) -> [JournalRecord] {
        let (sql, parameters) = Self.statement(reading: query)
        let rows = try connections.with { connection throws(PGError) in try connection.execute(sql, parameters) }
        return rows.all.compactMap(BusCommandRow.init).map(\.record)
    }

    /// The statement ``rows(_:)`` runs, with its parameters.
    ///
    /// The states are written into the statement, not passed: a plan made for any states
    /// cannot use an index that holds some (the dead letters', `commands_dead_letters`), and
    /// read the whole table for a state few commands are in. They are a `CommandState`'s
    /// names, never text from a user.
    static func statement(reading query: JournalQuery) -> (sql: String, parameters: [PGValue?]) {
        let states = query.states.isEmpty ? "" : "AND c.state IN (\(query.states.map { "'\($0.rawValue)'" }.sorted().joined(separator: ", ")))"
        let sql = """
            SELECT \(BusSQL.commandColumns) FROM cmdbus.commands c
            WHERE c.kind = 'command' \(states)
                AND ($1::text IS NULL OR c.name = $1) AND c.seq > coalesce($2::int8, 0)
                AND c.seq <= coalesce($3::int8, 9223372036854775807)
                AND ($5::uuid IS NULL OR c.correlation_id = $5)
                AND ($6::float8 IS NULL OR c.created_at >= to_timestamp($6::float8))
            ORDER BY c.seq \(query.newestFirst ? "DESC" : "ASC") LIMIT coalesce($4::int8, 9223372036854775807)
            """
        return (sql, [
            query.commandName.map(PGValue.text), query.afterSequence.map(PGValue.integer), query.throughSequence.map(PGValue.integer),
            query.limit.map(PGValue.integer), query.correlationID.map(PGValue.uuid),
            query.createdSince.map { PGValue.text(String($0.timeIntervalSince1970)) },
        ])
    }

    /// One command, by id.
    package func row(_ id: UUID) throws(PGError) -> JournalRecord? {
        try connections.with { connection throws(PGError) in try connection.execute(BusSQL.read, [.uuid(id)]) }
            .all.compactMap(BusCommandRow.init).first?.record
    }

    /// What the shared bus keeps of a command beyond a journal entry, for `journal show --bus`:
    /// its priority, the attempts it may take, when it is (or was) due, its timeout, the hosts
    /// that ran it (one a try) and the host that runs it now; `nil` if the bus has no such command.
    package func queueDetails(_ id: UUID) throws(PGError) -> JSONValue? {
        let rows = try connections.with { connection throws(PGError) in
            try connection.execute("""
                SELECT c.priority::int8 AS priority, c.max_attempts::int8 AS max_attempts, c.timeout_ms, c.run_at,
                    array_to_string(c.attempted_by, ',') AS attempted_by, h.hostname, h.pid::int8 AS pid
                FROM cmdbus.commands c LEFT JOIN cmdbus.hosts h ON h.id = c.lease_owner WHERE c.id = $1
                """, [.uuid(id)])
        }
        guard rows.count > 0 else { return nil }
        let row = rows[row: 0]
        var details: [String: JSONValue] = [
            "priority": .integer(row.integer("priority") ?? 0), "maxAttempts": .integer(row.integer("max_attempts") ?? 0),
            "attemptedBy": .array((row.text("attempted_by") ?? "").split(separator: ",").map { .string(String($0)) }),
            "runAt": row.date("run_at").map { .string($0.timestamp) } ?? .null,
            "timeoutSeconds": row.integer("timeout_ms").map { .number(Double($0) / 1000) } ?? .null,
            "runningOn": .null,
        ]
        if let hostname = row.text("hostname"), let pid = row.integer("pid") { details["runningOn"] = .string(BusHost.label(hostname: hostname, pid: pid)) }
        return .object(details)
    }

    /// Runs a failed, cancelled or timed-out command again, under its id, on whichever host takes
    /// it, and waits for it to end again.
    package func retry(_ id: UUID) async throws(PGError) -> BusCommandRow {
        let failure = Mutex<PGError?>(nil)
        let waiter = resultWaiter
        let row: BusCommandRow? = await withUnsafeContinuation { continuation in
            waiter.watch(id) { row in continuation.resume(returning: row) }
            do throws(PGError) {
                _ = try connections.with { connection throws(PGError) in
                    try connection.execute("""
                        WITH again AS (
                            UPDATE cmdbus.commands SET state = 'pending', finalized_at = NULL, result = NULL, error_code = NULL,
                                error_message = NULL, attempt = 0, declined_by = '{}', cancel_requested = false, run_at = now()
                            WHERE id = $1 AND state IN ('failed', 'cancelled', 'timedOut') RETURNING name
                        )
                        SELECT count(pg_notify('cmdbus_new', name)) AS notified FROM again
                        """, [.uuid(id)])
                }
            } catch {
                waiter.forget(id)
                failure.withLock { $0 = error }
                continuation.resume(returning: nil)
            }
        }
        if let row { return row }
        throw failure.withLock { $0 } ?? PGError(.connectionLost, "cannot reach the bus at \(location)")
    }

    /// Cancels a command in flight and its subcommands: a pending one ends `cancelled` at once,
    /// a running one's host is told to stop it. Returns whether one was in flight.
    package func cancel(_ id: UUID) throws(PGError) -> Bool {
        try Self.cancel(id, on: connections)
    }

    /// ``cancel(_:)`` on a pool of its own (a client's).
    package static func cancel(_ id: UUID, on connections: PGConnectionPool) throws(PGError) -> Bool {
        let rows = try connections.with { connection throws(PGError) in try connection.execute(BusSQL.cancel, [.uuidArray([id])]) }
        return (rows.count > 0 ? rows[row: 0].integer("flagged") ?? 0 : 0) > 0
    }
}

/// The bus read as a `Journal`, so `journal replay --bus` and `undo --bus` share the local code.
/// Hosts write it; this side only reads it, marks stale entries and links undos.
extension BusJournal: Journal {
    private func journalError(_ error: PGError) -> CommandBusError { .journalFailed(location, error.message) }

    package func accept(_ envelope: CommandEnvelope, payload: Data) async throws(CommandBusError) {
        throw .journalFailed(location, "the bus is written by its hosts; submit commands with --bus instead")
    }

    package func update(_ update: JournalUpdate, waitUntilDurable: Bool) async throws(CommandBusError) {
        throw .journalFailed(location, "the bus is written by its hosts")
    }

    package func record(_ id: UUID) async throws(CommandBusError) -> JournalRecord? {
        try await offThePool { () throws(PGError) in try self.row(id) }
    }

    package func records(_ query: JournalQuery) async throws(CommandBusError) -> [JournalRecord] {
        try await offThePool { () throws(PGError) in try self.rows(query) }
    }

    /// Runs a read of the bus on a thread of its own and returns what it read: the dashboard of a
    /// host asks from Swift's pool, whose few threads run the host's handlers and must not wait
    /// for PostgreSQL (as a handler's subcommands no longer do, ``SubcommandPoster``).
    private func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws(PGError) -> T) async throws(CommandBusError) -> T {
        let outcome = await DetachedThread.value { () -> Result<T, PGError> in
            do throws(PGError) { return .success(try body()) } catch { return .failure(error) }
        }
        switch outcome {
        case .success(let value): return value
        case .failure(let error): throw journalError(error)
        }
    }

    package func unfinished() async throws(CommandBusError) -> [JournalRecord] { [] }

    package func markFailed(_ id: UUID, error: CommandBusError) async throws(CommandBusError) {
        do {
            _ = try connections.with { connection throws(PGError) in
                try connection.execute("""
                    UPDATE cmdbus.commands SET state = 'failed', error_code = $2, error_message = $3, finalized_at = coalesce(finalized_at, now())
                    WHERE id = $1 AND state <> 'running'
                    """, [.uuid(id), .text(error.code.description), .text(error.message)])
            }
        } catch { throw journalError(error) }
    }

    package func linkUndo(_ undo: UUID, of original: UUID) async throws(CommandBusError) {
        do {
            _ = try connections.with { connection throws(PGError) in
                try connection.execute("UPDATE cmdbus.commands SET undone_by = $1 WHERE id = $2", [.uuid(undo), .uuid(original)])
                try connection.execute("UPDATE cmdbus.commands SET undo_of = $2 WHERE id = $1", [.uuid(undo), .uuid(original)])
            }
        } catch { throw journalError(error) }
    }

    package func setExcluded(_ id: UUID, _ excluded: Bool) async throws(CommandBusError) {
        throw .journalFailed(location, "undo --rebuild drops an entry from a local journal's replay; on the bus, undo it with its inverse")
    }
}
