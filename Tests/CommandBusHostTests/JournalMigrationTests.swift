import CommandBus
import CommandBusSQLite
import Foundation
import Testing

/// A journal written by the previous schema opens, is brought to the current one, and keeps its entries.
struct JournalMigrationTests {
    @Test func aVersionOneJournalIsUpgradedInPlaceAndKeepsItsEntries() async throws {
        let work = try TemporaryDirectory("cmdbus-migration")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        let versionOne = SQLiteJournalStatements.schema
            .replacingOccurrences(of: ",\n    discarded_at REAL", with: "")
            .replacingOccurrences(of: "CREATE INDEX commands_correlation ON commands(correlation_id, seq);", with: "")
        try #require(!versionOne.contains("discarded_at"))
        let old = try SQLiteDatabase(path: path, create: true)
        try old.execute(versionOne + "PRAGMA application_id = \(SQLiteJournal.applicationID); PRAGMA user_version = 1;")
        let id = UUID()
        try old.execute("""
            INSERT INTO commands (id, name, correlation_id, created_at, payload, state, accepted_at, updated_at)
            VALUES ('\(id.uuidString)', 'greet', '\(id.uuidString)', 1, X'7B7D', 'failed', 1, 1)
            """)
        old.close()

        let journal = try SQLiteJournal(path: path)
        let record = try #require(try await journal.record(id))
        #expect(record.state == .failed && record.discardedAt == nil)
        try await journal.discard(id)
        #expect(try await journal.record(id)?.discardedAt != nil)
        let check = try SQLiteDatabase(path: path, create: false)
        #expect(try check.integer("PRAGMA user_version") == SQLiteJournal.schemaVersion)
    }
}
