import CommandBus
@testable import CommandBusSQLite
import Foundation
import Testing

/// The dead letters of a long journal are read through their index (schema version 6), which a
/// version 5 file gets when it is opened.
struct JournalDeadLettersReadTests {
    /// 20,000 entries that succeeded and four that did not, in a version 5 file: opened, it is
    /// at version 6 with the index; a page of dead letters, newest first (the dashboard's), is
    /// the four, found by going down the index in its order, where the read went through every
    /// entry; and a page further back starts where it says. Going down the index, a page costs
    /// a page however many dead letters there are: no list of them all is made first, and no sort.
    @Test func aLongJournalsDeadLettersAreReadThroughTheirIndex() async throws {
        let work = try TemporaryDirectory("cmdbus-dead-letters")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        let versionFive = SQLiteJournalSchema.current.replacingOccurrences(of: SQLiteJournalSchema.deadLetterIndex, with: "")
        try #require(versionFive != SQLiteJournalSchema.current)
        let old = try JournalMigrationTests.oldJournal(at: path, schema: versionFive, version: 5)
        try old.execute("""
            WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 20004)
            INSERT INTO commands (seq, id, name, correlation_id, created_at, payload, state, accepted_at, updated_at)
                SELECT n, printf('%08X-0000-7000-8000-%012X', n, n), 'greet', printf('%08X-0000-7000-8000-%012X', n, n), 1, X'7B7D', 'pending', 1, 1 FROM g;
            WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 20004)
            INSERT INTO endings (seq, state, attempts, updated_at)
                SELECT n, CASE n WHEN 10 THEN 'failed' WHEN 5000 THEN 'timedOut' WHEN 15000 THEN 'cancelled' WHEN 20000 THEN 'failed' ELSE 'succeeded' END, 1, 1 FROM g;
            UPDATE sweep SET through = 20004;
            """)
        old.close()

        let journal = try SQLiteJournal(path: path)
        let deadLetters = JournalQuery(states: [.failed, .cancelled, .timedOut], limit: 50, newestFirst: true)
        #expect(try await journal.records(deadLetters).map(\.sequence) == [20000, 15000, 5000, 10])
        var furtherBack = deadLetters
        furtherBack.throughSequence = 14999
        furtherBack.limit = 1
        #expect(try await journal.records(furtherBack).map(\.sequence) == [5000])
        #expect(try await journal.records(JournalQuery(states: [.failed])).map(\.sequence) == [10, 20000])
        #expect(try await journal.records(JournalQuery(states: [.succeeded], limit: 2, newestFirst: true)).map(\.sequence) == [20004, 20003])

        let check = try SQLiteDatabase(path: path, create: false)
        defer { check.close() }
        #expect(try check.integer("PRAGMA user_version") == 6)
        let steps = try check.planSteps(of: SQLiteJournalStatements.sql(reading: deadLetters))
        #expect(steps.contains { $0.contains("USING INDEX endings_dead_letters") }, "\(steps)")
        #expect(!steps.contains { $0.hasPrefix("SCAN") && !$0.contains("USING INDEX endings_dead_letters") }, "a read of every entry: \(steps)")
        #expect(!steps.contains { $0.contains("TEMP B-TREE") || $0.contains("LIST SUBQUERY") }, "a sort, or a list of every dead letter: \(steps)")
        try JournalMigrationTests.expectIntact(check)
    }
}
