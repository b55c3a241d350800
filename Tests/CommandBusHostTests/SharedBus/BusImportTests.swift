import CommandBus
import CommandBusHost
import CommandBusPostgres
import CommandBusSQLite
import Foundation
import Testing

extension SharedBusTests {
    /// `journal import --bus` keeps a journal's history whole: trees at their depths, failures,
    /// undo links, attempts, times and payloads of any size, in statements of many entries.
    /// An entry a dead process left unfinished failed the whole import with PostgreSQL's
    /// `violates check constraint "commands_check"`, after the entries before it; it is left
    /// out and said so, as is one `undo --rebuild` took out of replay.
    @Test(.timeLimit(.minutes(4)))
    func anImportKeepsAJournalsHistoryWholeAndLeavesOutWhatIsUnfinished() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let local = try TemporaryDirectory()
        defer { local.remove() }
        try local.install("libGreeter.so", "libGreetAll.so", "libCounter.so", "libFixturePlugin.so")
        let journal = local.file("journal.sqlite").path
        func run(_ arguments: String...) async throws -> ProcessResult {
            try await cmdbus(arguments + ["--plugins", local.path, "--journal", journal])
        }
        // 2,400 greetings: pages of 1,000 as the import reads them.
        let lines = (0..<2_400).map { #"{"command": "greet", "payload": {"name": "n\#($0)"}}"# }.joined(separator: "\n")
        try Data(lines.utf8).write(to: local.file("lines.ndjson"))
        #expect(try await run("batch", local.file("lines.ndjson").path).status == 0)
        let tree = try await run("run", "greet-all", "-p", #"names=["Ada", "Bo"]"#, "-v")
        #expect(tree.status == 0, "\(tree.stderr)")
        #expect(try await run("run", "fixture.fail", "-p", "message=once").status == 1)
        for amount in [2, 3, 4] { #expect(try await run("run", "counter.add", "-p", "counter=a", "-p", "by=\(amount)").status == 0) }
        #expect(try await run("journal", "undo").status == 0, "the undo of by=4, linked to it")
        // Two payloads of 3 MB whose results are as large: more than a statement's 4 MiB together.
        let large = String(repeating: "x", count: 3_000_000)
        try Data(#"{"name": "\#(large)"}"#.utf8).write(to: local.file("large.json"))
        for _ in 0..<2 { #expect(try await run("run", "greet", "@" + local.file("large.json").path).status == 0) }

        let source = try SQLiteJournal(path: journal, durability: .synced)
        var listed = try await source.records(JournalQuery(limit: 10_000))
        let rebuilt = try #require(listed.first { $0.envelope.commandName == "counter.add" && $0.undoneBy == nil })
        #expect(try await run("journal", "undo", rebuilt.envelope.id.uuidString, "--rebuild").status == 0)
        // What a process that died while it ran leaves behind.
        try await source.accept(CommandEnvelope(commandName: "greet"), payload: Data(#"{"name": "Unfinished"}"#.utf8))
        listed = try await source.records(JournalQuery(limit: 10_000))
        // 2,400 greetings, a tree of 3, a failure, 3 additions and an undo, 2 large, 1 unfinished.
        #expect(listed.count == 2_411)

        let imported = try await Self.bus(database.url, "journal", "import", journal)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout == "imported 2409 new, 0 already present, 0 failed, 1 unfinished left out, 1 out of replay left out (as history: nothing ran again)\n", "\(imported.stdout)")
        #expect(imported.stderr.contains("1 unfinished entry was left out (a process died while they ran): finish them with 'cmdbus journal recover --journal \(journal) --plugins DIR'"), "\(imported.stderr)")
        #expect(imported.stderr.contains("1 entry taken out of replay by 'journal undo --rebuild' left out"), "\(imported.stderr)")

        let bus = try BusJournal(url: database.url)
        let onBus = Dictionary(uniqueKeysWithValues: try bus.rows(JournalQuery(limit: 10_000)).map { ($0.envelope.id, $0) })
        let kept = listed.filter { $0.state.isTerminal && !$0.excluded }
        #expect(onBus.count == kept.count)
        for record in kept {
            let copy = try #require(onBus[record.envelope.id], "\(record.envelope.commandName) \(record.envelope.id)")
            #expect(ImportedEntry(copy) == ImportedEntry(record))
        }
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE started_at IS NOT NULL") == "\(kept.count)\n")
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE parent_id IS NOT NULL") == "2\n")
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'pending' OR state = 'running'") == "0\n")
        let treeID = try #require(listed.first { $0.envelope.commandName == "greet-all" }?.envelope.id.uuidString)
        let drawn = try await Self.bus(database.url, "journal", "tree", treeID)
        #expect(drawn.stdout.split(separator: "\n").count == 3 && drawn.stdout.contains("greet  succeeded"), "\(drawn.stdout)")

        // PostgreSQL's text holds no NUL: such an entry is named, and nothing of its statement stored.
        let nul = JournalRecord(
            sequence: 1, envelope: CommandEnvelope(commandName: "greet"), payload: Data("{}".utf8), state: .failed,
            errorCode: "failed", errorMessage: "cut\u{0}here", finishedAt: Date())
        #expect {
            _ = try bus.importHistory([nul])
        } throws: { error in
            (error as? PGError)?.message.hasPrefix("entry \(nul.envelope.id) ('greet') has a NUL character") == true
        }
        #expect(onBus.count == (try bus.rows(JournalQuery(limit: 10_000))).count)

        let again = try await Self.bus(database.url, "journal", "import", journal, "--json")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout == #"{"excluded":1,"failed":0,"new":0,"present":2409,"unfinished":1}"# + "\n", "\(again.stdout)")
    }
}

/// What an import keeps of an entry, to compare a journal's with the bus's (times within a
/// millisecond: PostgreSQL keeps microseconds).
private struct ImportedEntry: Equatable {
    var envelope: CommandEnvelope
    var payload: Data
    var result: Data?
    var state: CommandState
    var attempts: Int
    var errorCode: String?
    var errorMessage: String?
    var undoOf: UUID?
    var undoneBy: UUID?
    var created: Double
    var finished: Double

    init(_ record: JournalRecord) {
        envelope = record.envelope
        envelope.createdAt = Date(timeIntervalSince1970: 0)
        payload = record.payload
        result = record.result
        state = record.state
        attempts = record.attempts
        errorCode = record.errorCode
        errorMessage = record.errorMessage
        undoOf = record.undoOf
        undoneBy = record.undoneBy
        created = record.envelope.createdAt.timeIntervalSince1970
        finished = (record.finishedAt ?? record.updatedAt).timeIntervalSince1970
    }

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.envelope == rhs.envelope && lhs.payload == rhs.payload && lhs.result == rhs.result && lhs.state == rhs.state
            && lhs.attempts == rhs.attempts && lhs.errorCode == rhs.errorCode && lhs.errorMessage == rhs.errorMessage
            && lhs.undoOf == rhs.undoOf && lhs.undoneBy == rhs.undoneBy
            && abs(lhs.created - rhs.created) < 0.001 && abs(lhs.finished - rhs.finished) < 0.001
    }
}
