import CommandBus
import CommandBusSQLite
import Foundation
import Testing

/// Recovery finds every command without an ending, whether a sweep has passed it or not, and a
/// command accepted again after its ending is unfinished until it ends again (schema version 4:
/// endings in their own table, no index on unfinished states).
struct JournalSweepTests {
    /// Adds a command a dead process left `pending` (no owner recorded), straight into the file.
    static func orphan(_ path: String) throws -> UUID {
        let id = UUID()
        try execute(path, """
            INSERT INTO commands (id, name, correlation_id, created_at, payload, state, accepted_at, updated_at)
            VALUES ('\(id.uuidString)', 'greet', '\(id.uuidString)', 1, X'7B7D', 'pending', 1, 1)
            """)
        return id
    }

    /// Adds `count` commands that succeeded, straight into the file, as the journal writes them.
    static func succeeded(_ path: String, count: Int) throws -> [UUID] {
        let ids = (0..<count).map { _ in UUID() }
        for id in ids {
            try execute(path, """
                INSERT INTO commands (id, name, correlation_id, created_at, payload, state, accepted_at, updated_at)
                VALUES ('\(id.uuidString)', 'greet', '\(id.uuidString)', 1, X'7B7D', 'pending', 1, 1);
                INSERT INTO endings (seq, state, attempts, result, finished_at, updated_at)
                VALUES (last_insert_rowid(), 'succeeded', 1, X'31', 2, 2);
                """)
        }
        return ids
    }

    static func execute(_ path: String, _ sql: String) throws {
        let database = try SQLiteDatabase(path: path, create: false)
        defer { database.close() }
        try database.execute(sql)
    }

    /// A command accepted and ended through the journal.
    static func ended(_ journal: SQLiteJournal) async throws -> CommandEnvelope {
        let envelope = CommandEnvelope(commandName: "greet")
        try await journal.accept(envelope, payload: Data("{}".utf8))
        try await journal.update(JournalUpdate(id: envelope.id, state: .succeeded, attempts: 1, result: Data("1".utf8)), waitUntilDurable: true)
        return envelope
    }

    static func integers(_ path: String, _ sql: String) throws -> [Int64] {
        let database = try SQLiteDatabase(path: path, create: false, readOnly: true)
        defer { database.close() }
        let statement = try database.prepare(sql)
        var values: [Int64] = []
        while try statement.step() { values.append(statement.int64(0)) }
        return values
    }

    @Test func recoveryFindsCommandsBeforeAndAfterTheSweep() async throws {
        let work = try TemporaryDirectory("cmdbus-sweep")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        _ = try SQLiteJournal(path: path)
        let before = try Self.orphan(path)
        let earlier = try Self.succeeded(path, count: Int(SQLiteJournal.sweepOnOpenThreshold))

        // Opening a file more than the threshold behind sweeps: the orphan moves to `unended`.
        let journal = try SQLiteJournal(path: path)
        #expect(try Self.integers(path, "SELECT through FROM sweep") == [65])
        #expect(try Self.integers(path, "SELECT seq FROM unended") == [1])
        for _ in 0..<3 { _ = try await Self.ended(journal) }
        let after = try Self.orphan(path)
        // Past the sweep, recovery reads the commands since it.
        #expect(try await journal.unfinished().map(\.envelope.id) == [before, after])
        _ = try SQLiteJournal(path: path)
        #expect(try Self.integers(path, "SELECT through FROM sweep") == [65], "a few commands behind: no sweep")

        // A command accepted again (a retry) that a sweep passed has no ending until it ends
        // again, and is among the unended; its attempts add up.
        let retried = CommandEnvelope(commandName: "greet", id: earlier[0], createdAt: Date())
        try await journal.accept(retried, payload: Data("{}".utf8))
        #expect(try await journal.record(retried.id)?.state == .pending)
        #expect(try await journal.record(retried.id)?.result == nil)
        #expect(try await journal.record(retried.id)?.attempts == 1)
        #expect(try Self.integers(path, "SELECT seq FROM unended ORDER BY seq") == [1, 2])
        try await journal.update(JournalUpdate(id: retried.id, state: .failed, attempts: 2, error: .cancelled("greet")), waitUntilDurable: true)
        let record = try #require(try await journal.record(retried.id))
        #expect(record.state == .failed && record.attempts == 3 && record.result == nil && record.errorCode == "cancelled")

        // The next sweep keeps the orphans and lets go of what ended.
        _ = try Self.succeeded(path, count: Int(SQLiteJournal.sweepOnOpenThreshold))
        let reopened = try SQLiteJournal(path: path)
        #expect(try Self.integers(path, "SELECT seq FROM unended ORDER BY seq") == [1, 69])
        #expect(try Self.integers(path, "SELECT through FROM sweep") == [133])
        #expect(try await reopened.unfinished().map(\.envelope.id) == [before, after])
        try await reopened.discard(before)
        #expect(try await reopened.unfinished().map(\.envelope.id) == [after])
        let discarded = try #require(try await reopened.record(before))
        #expect(discarded.state == .cancelled && discarded.finishedAt != nil && discarded.finishedAt == discarded.discardedAt)
    }

    /// The commands recovery reads as unfinished, whoever runs them (``SQLiteJournal/unfinished()``
    /// leaves out this process's own).
    static func recoverable(_ path: String) throws -> [UUID] {
        let database = try SQLiteDatabase(path: path, create: false, readOnly: true)
        defer { database.close() }
        return try SQLiteJournalStatements(database, readOnly: true).unfinishedWithOwners().map(\.record.envelope.id)
    }

    /// `count` commands accepted and ended through the journal at once, so they share commits.
    static func endedTogether(_ journal: SQLiteJournal, count: Int) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<count { group.addTask { _ = try await Self.ended(journal) } }
            try await group.waitForAll()
        }
    }

    /// A writer sweeps as it records endings. While it alone wrote the commands past the last
    /// sweep, it writes its own commands still in flight to `unended` and leaves the newest past
    /// the sweep; once another process wrote one there, it reads them all.
    @Test func aWriterSweepsItsOwnCommandsCheaplyAndAnotherProcesssCommandsInFull() async throws {
        let work = try TemporaryDirectory("cmdbus-sweep")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        let journal = try SQLiteJournal(path: path)
        var stuck: [UUID] = []
        for _ in 0..<3 {
            let envelope = CommandEnvelope(commandName: "greet")
            try await journal.accept(envelope, payload: Data("{}".utf8))
            stuck.append(envelope.id)
        }
        let interval = SQLiteJournalStatements.sweepInterval
        try await Self.endedTogether(journal, count: interval)
        // Its own sweep: through the newest but the last 2,048, with the three in flight unended.
        #expect(try Self.integers(path, "SELECT through FROM sweep") == [Int64(3 + interval - 2_048)])
        #expect(try Self.integers(path, "SELECT seq FROM unended ORDER BY seq") == [1, 2, 3])
        #expect(try Self.recoverable(path) == stuck)

        // Another process's command past the sweep: the next sweep reads every command since.
        let orphan = try Self.orphan(path)
        try await Self.endedTogether(journal, count: interval)
        let newest = Int64(3 + interval + 1 + interval)
        #expect(try Self.integers(path, "SELECT through FROM sweep") == [newest])
        #expect(try Self.integers(path, "SELECT seq FROM unended ORDER BY seq") == [1, 2, 3, Int64(3 + interval + 1)])
        #expect(try Self.recoverable(path) == stuck + [orphan])
    }

    /// A burst of commands in flight (accepted, not yet run, as a burst of posts leaves them)
    /// holds a writer's own sweep back, where writing each to `unended` and deleting it again
    /// moments later cost a statement each way. Once they end, the next sweep passes them.
    @Test func aBurstInFlightHoldsTheSweepBackInsteadOfFillingUnended() async throws {
        let work = try TemporaryDirectory("cmdbus-sweep")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        let journal = try SQLiteJournal(path: path)
        let burst = SQLiteJournalStatements.unendedPerSweep + 1
        var inFlight: [CommandEnvelope] = []
        for _ in 0..<burst {
            let envelope = CommandEnvelope(commandName: "greet")
            try await journal.accept(envelope, payload: Data("{}".utf8))
            inFlight.append(envelope)
        }
        let interval = SQLiteJournalStatements.sweepInterval
        let throughBefore = try Self.integers(path, "SELECT through FROM sweep")
        try await Self.endedTogether(journal, count: interval)
        #expect(try Self.integers(path, "SELECT through FROM sweep") == throughBefore)
        #expect(try Self.integers(path, "SELECT count(*) FROM unended") == [0])
        #expect(Set(try Self.recoverable(path)) == Set(inFlight.map(\.id)))

        for envelope in inFlight {
            try await journal.update(JournalUpdate(id: envelope.id, state: .succeeded, attempts: 1), waitUntilDurable: true)
        }
        try await Self.endedTogether(journal, count: interval)
        // The sweep runs at the commit whose endings reach the interval; which commands' accepts
        // were in by then depends on the tasks' order, so its bound lies between passing the
        // burst and lagging the newest command by 2,048.
        let newest = Int64(burst + 2 * interval)
        let through = try #require(try Self.integers(path, "SELECT through FROM sweep").first)
        #expect(through >= Int64(burst) && through <= newest - 2_048, "swept through \(through)")
        #expect(try Self.integers(path, "SELECT count(*) FROM unended") == [0])
        #expect(try Self.recoverable(path).isEmpty)
    }

    /// A query's statement is kept for the next query of its shape; its values are bound afresh,
    /// so pages interleaved with other queries still come out right.
    @Test func pagesOfOneQueryShapeComeOutRightWhileOtherQueriesRunBetween() async throws {
        let work = try TemporaryDirectory("cmdbus-sweep")
        defer { work.remove() }
        let journal = try SQLiteJournal(path: work.file("journal.sqlite").path)
        var written: [UUID] = []
        for _ in 0..<25 { written.append(try await Self.ended(journal).id) }
        var paged: [UUID] = []
        var cursor: Int64?
        while true {
            let page = try await journal.records(JournalQuery(states: [.succeeded], afterSequence: cursor, limit: 10))
            paged += page.map(\.envelope.id)
            let newest = try await journal.records(JournalQuery(limit: 2, newestFirst: true))
            #expect(newest.map(\.envelope.id) == Array(written.suffix(2).reversed()))
            guard page.count == 10, let last = page.last else { break }
            cursor = last.sequence
        }
        #expect(paged == written)
        #expect(try await journal.records(JournalQuery(afterSequence: 20, throughSequence: 22)).map(\.sequence) == [21, 22])
        #expect(try await journal.records(JournalQuery(states: [.failed])).isEmpty)
    }

    @Test func theFirstEndingIsKept() async throws {
        let work = try TemporaryDirectory("cmdbus-sweep")
        defer { work.remove() }
        let journal = try SQLiteJournal(path: work.file("journal.sqlite").path)
        let envelope = CommandEnvelope(commandName: "greet")
        try await journal.accept(envelope, payload: Data("{}".utf8))
        try await journal.update(JournalUpdate(id: envelope.id, state: .timedOut, attempts: 1, error: .cancelled("greet")), waitUntilDurable: true)
        try await journal.update(JournalUpdate(id: envelope.id, state: .succeeded, attempts: 1, result: Data("1".utf8)), waitUntilDurable: true)
        let record = try #require(try await journal.record(envelope.id))
        #expect(record.state == .timedOut && record.result == nil && record.attempts == 1)
    }

    @Test func aReplayThatFindsAStalePayloadMarksTheEntryFailedAndKeepsItsResult() async throws {
        let work = try TemporaryDirectory("cmdbus-sweep")
        defer { work.remove() }
        let journal = try SQLiteJournal(path: work.file("journal.sqlite").path)
        let envelope = try await Self.ended(journal)
        try await journal.markFailed(envelope.id, error: CommandBusError(code: .decodingFailed, message: "stale"))
        let record = try #require(try await journal.record(envelope.id))
        #expect(record.state == .failed && record.errorMessage == "stale" && record.result == Data("1".utf8) && record.finishedAt != nil)
    }

    /// The journal counts a run's attempts when the run ends, so a running command read 0 in
    /// `journal list` and on the dashboard; it is on one more attempt than its earlier runs made.
    @Test func aRunningCommandCountsTheAttemptItIsOn() async throws {
        let work = try TemporaryDirectory("cmdbus-attempts")
        let journal = try SQLiteJournal(path: work.file("journal.sqlite").path)
        let envelope = CommandEnvelope(commandName: "greet")
        func attempts() async throws -> Int? { try await journal.record(envelope.id)?.attempts }
        try await journal.accept(envelope, payload: Data("{}".utf8))
        #expect(try await attempts() == 0, "pending: not started")
        try await journal.update(JournalUpdate(id: envelope.id, state: .running, attempts: 1), waitUntilDurable: true)
        #expect(try await attempts() == 1, "running its first attempt")
        try await journal.update(JournalUpdate(id: envelope.id, state: .failed, attempts: 1, error: .cancelled("greet")), waitUntilDurable: true)
        #expect(try await attempts() == 1)

        // A retry: accepted again under its id, it keeps the first run's attempt and runs its second.
        try await journal.accept(envelope, payload: Data("{}".utf8))
        #expect(try await attempts() == 1, "pending again: the first run's attempt")
        try await journal.update(JournalUpdate(id: envelope.id, state: .running, attempts: 1), waitUntilDurable: true)
        #expect(try await attempts() == 2, "running its second attempt")
        try await journal.update(JournalUpdate(id: envelope.id, state: .succeeded, attempts: 1, result: Data("1".utf8)), waitUntilDurable: true)
        #expect(try await attempts() == 2)
    }

    /// Recovery ends a subcommand a dead process left running as cancelled, counting the
    /// attempt that process made once: it counted every earlier run's attempts a second time.
    @Test func recoveryCountsADeadRunsAttemptOnce() async throws {
        let work = try TemporaryDirectory("cmdbus-attempts")
        let path = work.file("journal.sqlite").path
        _ = try SQLiteJournal(path: path)
        // Two attempts in earlier runs, then a third run that died (no owner: a dead process).
        let child = UUID(), root = UUID()
        try Self.execute(path, """
            INSERT INTO commands (id, name, parent_id, correlation_id, created_at, payload, state, attempts, accepted_at, updated_at)
            VALUES ('\(child.uuidString)', 'greet', '\(root.uuidString)', '\(root.uuidString)', 1, X'7B7D', 'running', 2, 1, 1)
            """)
        let journal = try SQLiteJournal(path: path)
        #expect(try await journal.record(child)?.attempts == 3, "running its third attempt")
        let tickets = try await CommandBus(configuration: .init(journal: journal)).recover()
        #expect(tickets.isEmpty, "a subcommand is not run on its own")
        try await journal.flush()
        let record = try #require(try await journal.record(child))
        #expect(record.state == .cancelled)
        #expect(record.attempts == 3, "two earlier attempts and the dead run's")
    }

    /// A command a dead process left running is run again by recovery, and that run counted
    /// only its own attempts: the dead run's was lost (one attempt in two runs, `journal list`
    /// read 1; with no handler left, 0). Accepted again, it keeps the dead run's attempt.
    @Test func aCommandRecoveredCountsTheAttemptItsDeadRunMade() async throws {
        let work = try TemporaryDirectory("cmdbus-attempts")
        let path = work.file("journal.sqlite").path
        _ = try SQLiteJournal(path: path)
        // Two attempts in earlier runs, then a third run that died (no owner: a dead process).
        let root = UUID()
        try Self.execute(path, """
            INSERT INTO commands (id, name, correlation_id, created_at, payload, state, attempts, accepted_at, updated_at)
            VALUES ('\(root.uuidString)', 'greet', '\(root.uuidString)', 1, X'7B7D', 'running', 2, 1, 1)
            """)
        let journal = try SQLiteJournal(path: path)
        #expect(try await journal.record(root)?.attempts == 3, "running its third attempt")
        let tickets = try await CommandBus(configuration: .init(journal: journal)).recover()
        #expect(tickets.count == 1)
        await #expect(throws: CommandBusError.self) { try await tickets[0].result }
        try await journal.flush()
        let record = try #require(try await journal.record(root))
        #expect(record.state == .failed && record.errorCode == "noHandler")
        #expect(record.attempts == 3, "two earlier attempts and the dead run's; the recovery found no handler")

        // Accepted again once more (a retry), it keeps all three, and runs a fourth.
        try await journal.accept(record.envelope, payload: record.payload)
        try await journal.update(JournalUpdate(id: root, state: .running, attempts: 1), waitUntilDurable: true)
        #expect(try await journal.record(root)?.attempts == 4)
    }
}
