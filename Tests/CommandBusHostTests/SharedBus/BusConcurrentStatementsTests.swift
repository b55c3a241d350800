import CommandBus
@testable import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// Every statement that changes many commands at once takes them in id order (a host's
    /// batch of ends by being written in that order), so two of them wanting the same rows never
    /// wait on each other: a host's finisher ending a batch and its poster cancelling trees in a
    /// transaction deadlocked under `bus cancel --running`, and PostgreSQL failed one.
    /// Each statement runs here while another transaction holds the lowest of three rows it
    /// changes, the rows written highest first (the order a scan finds them in): waiting for the
    /// lowest, it must hold neither of the others yet.
    @Test(.timeLimit(.minutes(2)))
    func statementsThatChangeManyCommandsLockThemInIDOrder() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        let host = UUID()
        try connection.insertHost(host, handling: ["a"])
        let ids = (1...3).map { UUID(uuidString: String(format: "00000000-0000-0000-0000-%012d", $0))! }
        let url = database.url

        /// Writes the three rows, highest id first, as `state`, the lowest one's parent `parent` if given.
        func write(_ state: String, parent: UUID? = nil) throws {
            try connection.execute("DELETE FROM cmdbus.commands")
            for id in ids.reversed() {
                let isParent = parent == id
                try connection.execute("""
                    INSERT INTO cmdbus.commands (id, name, payload, correlation_id, parent_id, state, attempt, lease_owner, started_at, finalized_at)
                    VALUES ($1, 'a', '\\x7b7d', $2, $3, $4, 1, CASE WHEN $4 = 'running' THEN $5::uuid END, now(),
                        CASE WHEN $4 IN ('failed') THEN now() END)
                    """, [.uuid(id), .uuid(parent ?? id), parent.flatMap { isParent ? nil : .uuid($0) }, .text(state), .uuid(host)])
            }
        }

        /// Runs `statement` on a connection of its own while the lowest row is held; checks the
        /// others are free while it waits; gives the number of rows it changed.
        func changed(by statement: String, _ run: @escaping @Sendable (PGConnection) throws -> Int) async throws -> Int {
            let holder = try PGConnection(url: url)
            try holder.execute("BEGIN")
            try holder.execute("SELECT id FROM cmdbus.commands WHERE id = $1 FOR UPDATE", [.uuid(ids[0])])
            async let result = onAThreadOfItsOwn { try run(PGConnection(url: url)) }
            #expect(try await oneStatementWaitsForALock(connection), "\(statement) waits for the lowest row")
            let probe = try PGConnection(url: url)
            for id in ids.dropFirst() {
                try probe.execute("BEGIN")
                var free = true
                do { try probe.execute("SELECT id FROM cmdbus.commands WHERE id = $1 FOR NO KEY UPDATE NOWAIT", [.uuid(id)]) } catch { free = false }
                try probe.execute("ROLLBACK")
                #expect(free, "\(statement) holds row \(id) while it waits for the lowest: it locks out of id order")
            }
            try holder.execute("ROLLBACK")
            return try await result
        }

        try write("running")
        // A host's batch of ends, put in id order as a host puts it.
        let ends = JSONValue.array(BusSQL.endsInIDOrder(ids.reversed().map { ($0, ["attempt": .integer(1), "state": .string("succeeded")]) }))
        #expect(try await changed(by: "a batch of ends") {
            try $0.execute(BusSQL.complete, [.text(ends.text), .uuid(host)]).all.count
        } == 3)

        try write("running", parent: ids[2])
        #expect(try await changed(by: "cancelling a tree") {
            Int(try $0.execute(BusSQL.cancel, [.uuidArray([ids[2]])])[row: 0].integer("flagged") ?? -1)
        } == 3)

        // A host's poster cancels the subcommands of its cancelled handlers a batch at a time:
        // a tree after another in one transaction, it held the rows of each while it waited for
        // the next.
        try write("running")
        let poster = SubcommandPoster(url: url)
        defer { poster.stop() }
        #expect(try await changed(by: "a poster's batch of cancels") { connection in
            poster.run(ids.reversed().map { .cancel($0) }, on: PGSession(url: url))
            return Int(try connection.execute("SELECT count(*)::int8 AS n FROM cmdbus.commands WHERE cancel_requested")[row: 0].integer("n") ?? -1)
        } == 3)

        try write("running")
        #expect(try await changed(by: "a drain's hand-back") {
            Int(try $0.execute(BusSQL.handBack, [.uuid(host)])[row: 0].integer("back") ?? -1)
        } == 3)

        try write("pending")
        #expect(try await changed(by: "bus cancel") {
            try BusCancel.cancel(["a"], running: false, by: "test", on: $0).first?.cancelled ?? -1
        } == 3)

        try write("failed")
        #expect(try await changed(by: "bus retry") {
            try BusRetry.retry(["a"], states: [.failed], within: nil, on: $0).first?.retried ?? -1
        } == 3)

        // A prune of a tree that ended: it deleted in the order its plan found the rows.
        try write("failed", parent: ids[2])
        #expect(try await changed(by: "a prune") {
            Int(try $0.execute(BusSQL.prune(counting: false), [
                .text(String(Date().timeIntervalSince1970 + 60)), .textArray(["failed"]), .integer(0), .integer(1_000), .bool(false),
            ])[row: 0].integer("removed") ?? -1)
        } == 3)
    }

    /// `bus retry` of an old dead letter while a prune removes it: the prune waited for the
    /// retry's row, then deleted it by its id, pending again, and the retried command was lost.
    /// The prune checks again that what it deletes ended before its cutoff, and keeps the
    /// retried command's tree whole: its subcommand, ended two days ago, stays with it.
    @Test(.timeLimit(.minutes(2)))
    func aDeadLetterRetriedWhileAPruneRemovesItIsKept() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        let root = UUID(), child = UUID()
        for (id, parent) in [(root, nil), (child, root)] as [(UUID, UUID?)] {
            try connection.execute("""
                INSERT INTO cmdbus.commands (id, name, payload, correlation_id, parent_id, state, attempt, finalized_at, error_code)
                VALUES ($1, 'a', '\\x7b7d', $2, $3, 'failed', 1, now() - interval '2 days', 'handlerFailed')
                """, [.uuid(id), .uuid(root), parent.map(PGValue.uuid)])
        }
        let retrying = try PGConnection(url: database.url)
        try retrying.execute("BEGIN")
        #expect(try BusRetry.retry(["a"], states: [.failed], within: nil, on: retrying).first?.retried == 1)
        let url = database.url
        async let pruned = onAThreadOfItsOwn {
            try PGConnection(url: url).execute(BusSQL.prune(counting: false), [
                .text(String(Date().timeIntervalSince1970 - 86_400)), .textArray(["failed"]), .integer(0), .integer(1_000), .bool(false),
            ])[row: 0].integer("removed")
        }
        #expect(try await oneStatementWaitsForALock(connection), "the prune waits for the retried row")
        try retrying.execute("COMMIT")
        #expect(try await pruned == 0, "a tree goes whole or not at all")
        #expect(try await database.sql("SELECT state FROM cmdbus.commands ORDER BY parent_id NULLS FIRST") == "pending\nfailed\n")
    }
}

/// Whether, within 10 s, one statement in `connection`'s database waits for a lock (on a row
/// another transaction holds).
private func oneStatementWaitsForALock(_ connection: PGConnection) async throws -> Bool {
    for _ in 0..<500 {
        let row = try connection.execute("""
            SELECT count(*)::int8 AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
            """)[row: 0]
        if row.integer("n") == 1 { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return false
}

/// Runs `body` on a thread of its own, for a call that blocks its thread (a statement waiting on
/// a lock), and gives what it returned.
func onAThreadOfItsOwn<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
