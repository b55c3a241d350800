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

    /// A journal file at `path` laid out as `schema` says, marked as version `version`.
    static func oldJournal(at path: String, schema: String, version: Int) throws -> SQLiteDatabase {
        let old = try SQLiteDatabase(path: path, create: true)
        try old.execute(schema + "PRAGMA application_id = \(SQLiteJournal.applicationID); PRAGMA user_version = \(version);")
        return old
    }

    /// Expects SQLite's own check of `database` to find nothing wrong.
    static func expectIntact(_ database: SQLiteDatabase) throws {
        let integrity = try database.prepare("PRAGMA integrity_check")
        #expect(try integrity.step() && integrity.string(0) == "ok")
    }

    @Test(arguments: [1, 2, 3])
    func anOlderJournalIsUpgradedInPlaceAndKeepsItsEntries(version: Int) async throws {
        let work = try TemporaryDirectory("cmdbus-migration")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        let schema = Self.schema(version: version)
        try #require(schema.contains("AUTOINCREMENT") == (version < 3) && schema.contains("discarded_at") == (version >= 2))
        let old = try Self.oldJournal(at: path, schema: schema, version: version)
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
        try Self.expectIntact(check)
    }

    /// A version 4 file's correlation index, which held every command, is rebuilt to hold only
    /// subcommands, and its trees are found as before (``JournalTreeQueryTests``).
    @Test func aVersionFourJournalGetsThePartialIndexAndKeepsItsTrees() async throws {
        let work = try TemporaryDirectory("cmdbus-migration")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        let old = try Self.oldJournal(at: path, schema: SQLiteJournalSchema.versionFour, version: 4)
        let forest = JournalTreeQueryTests.Forest()
        for (seq, envelope) in forest.all.enumerated() {
            try old.execute("""
                INSERT INTO commands (seq, id, name, parent_id, correlation_id, created_at, payload, state, accepted_at, updated_at)
                VALUES (\(seq + 1), '\(envelope.id.uuidString)', '\(envelope.commandName)',
                    \(envelope.parentID.map { "'\($0.uuidString)'" } ?? "NULL"), '\(envelope.correlationID.uuidString)', 1, X'7B7D', 'pending', 1, 1);
                INSERT INTO endings (seq, state, attempts, updated_at) VALUES (\(seq + 1), 'succeeded', 1, 1);
                """)
        }
        try old.execute("UPDATE sweep SET through = \(forest.all.count)")
        old.close()

        let journal = try SQLiteJournal(path: path)
        let tree = try await journal.records(JournalQuery(correlationID: forest.root.id))
        #expect(tree.map(\.envelope.id) == [forest.root, forest.child, forest.grandchild, forest.joined].map(\.id))
        #expect(tree.allSatisfy { $0.state == .succeeded })

        let check = try SQLiteDatabase(path: path, create: false)
        defer { check.close() }
        #expect(try check.integer("PRAGMA user_version") == SQLiteJournal.schemaVersion)
        let index = try check.prepare("SELECT sql FROM sqlite_master WHERE name = 'commands_correlation'")
        #expect(try index.step() && index.string(0)?.hasSuffix("WHERE correlation_id <> id") == true)
        // Only the four commands whose correlation id is not their own are in it.
        #expect(try check.integer("SELECT count(*) FROM commands INDEXED BY commands_correlation WHERE correlation_id <> id") == 4)
        try Self.expectIntact(check)
    }

    @Test func aReadOnlyCommandOnAnOlderJournalSaysHowToUpgradeIt() async throws {
        let work = try TemporaryDirectory("cmdbus-migration")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        try Self.oldJournal(at: path, schema: Self.versionTwo, version: 2).close()
        let error = #expect(throws: CommandBusError.self) { _ = try SQLiteJournal(path: path, readOnly: true) }
        #expect(error?.message.contains("has journal schema version 2; open it once with any journal command (cmdbus journal list) to upgrade it to version \(SQLiteJournal.schemaVersion)") == true)
    }
}
