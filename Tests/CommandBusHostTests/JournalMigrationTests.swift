import CommandBus
import CommandBusSQLite
import Foundation
import Testing

/// A journal written by an earlier schema opens, is brought to the current one in place, and keeps
/// its entries, their sequence numbers and their order; new entries follow the old ones.
struct JournalMigrationTests {
    /// Version 2's table: version 3's with `AUTOINCREMENT`.
    static let versionTwo = SQLiteJournalSchema.versionThree
        .replacingOccurrences(of: "seq INTEGER PRIMARY KEY,", with: "seq INTEGER PRIMARY KEY AUTOINCREMENT,")

    /// Version 1's: version 2's without `discarded_at` and the correlation index.
    static let versionOne = versionTwo
        .replacingOccurrences(of: ",\n    discarded_at REAL", with: "")
        .replacingOccurrences(of: "CREATE INDEX commands_correlation ON commands(correlation_id, seq);", with: "")

    /// The layout of `version`.
    static func schema(version: Int) -> String {
        switch version {
        case 1: versionOne
        case 2: versionTwo
        default: SQLiteJournalSchema.versionThree
        }
    }

    @Test(arguments: [1, 2, 3])
    func anOlderJournalIsUpgradedInPlaceAndKeepsItsEntries(version: Int) async throws {
        let work = try TemporaryDirectory("cmdbus-migration")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        let schema = Self.schema(version: version)
        try #require(schema.contains("AUTOINCREMENT") == (version < 3) && schema.contains("discarded_at") == (version >= 2))
        let old = try SQLiteDatabase(path: path, create: true)
        try old.execute(schema + "PRAGMA application_id = \(SQLiteJournal.applicationID); PRAGMA user_version = \(version);")
        // Sequence numbers with a gap, as a journal whose last rows were rolled back would have;
        // the last entry was left running by a process that is gone (no owner recorded).
        let ids = [UUID(), UUID(), UUID(), UUID()]
        for (id, (seq, state)) in zip(ids, [(1, "failed"), (2, "succeeded"), (5, "failed"), (7, "running")]) {
            try old.execute("""
                INSERT INTO commands (seq, id, name, correlation_id, created_at, payload, state, attempts, result, accepted_at, updated_at)
                VALUES (\(seq), '\(id.uuidString)', 'greet', '\(id.uuidString)', 1, X'7B7D', '\(state)', 1,
                    \(state == "succeeded" ? "X'7B7D'" : "NULL"), 1, 1)
                """)
        }
        old.close()

        let journal = try SQLiteJournal(path: path)
        let record = try #require(try await journal.record(ids[0]))
        #expect(record.state == .failed && record.discardedAt == nil && record.attempts == 1)
        let succeeded = try #require(try await journal.record(ids[1]))
        #expect(succeeded.state == .succeeded && succeeded.result == Data("{}".utf8) && succeeded.attempts == 1)
        #expect(try await journal.unfinished().map(\.envelope.id) == [ids[3]])
        try await journal.discard(ids[0])
        #expect(try await journal.record(ids[0])?.discardedAt != nil)
        try await journal.discard(ids[3])
        #expect(try await journal.record(ids[3])?.state == .cancelled)
        #expect(try await journal.unfinished().isEmpty)
        let added = CommandEnvelope(commandName: "greet")
        try await journal.accept(added, payload: Data("{}".utf8))

        let check = try SQLiteDatabase(path: path, create: false)
        defer { check.close() }
        #expect(try check.integer("PRAGMA user_version") == SQLiteJournal.schemaVersion)
        #expect(try check.integer("SELECT count(*) FROM sqlite_master WHERE sql LIKE '%AUTOINCREMENT%'") == 0)
        #expect(try check.integer("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name LIKE 'commands_%'") == 2)
        #expect(try check.integer("SELECT seq FROM commands WHERE id = '\(ids[2].uuidString)'") == 5)
        #expect(try check.integer("SELECT seq FROM commands WHERE id = '\(added.id.uuidString)'") == 8)
        let integrity = try check.prepare("PRAGMA integrity_check")
        #expect(try integrity.step() && integrity.string(0) == "ok")
    }

    @Test func aReadOnlyCommandOnAnOlderJournalSaysHowToUpgradeIt() async throws {
        let work = try TemporaryDirectory("cmdbus-migration")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        let old = try SQLiteDatabase(path: path, create: true)
        try old.execute(Self.versionTwo + "PRAGMA application_id = \(SQLiteJournal.applicationID); PRAGMA user_version = 2;")
        old.close()
        let error = #expect(throws: CommandBusError.self) { _ = try SQLiteJournal(path: path, readOnly: true) }
        #expect(error?.message.contains("has journal schema version 2; open it once with any journal command (cmdbus journal list) to upgrade it to version \(SQLiteJournal.schemaVersion)") == true)
    }
}
