import CommandBusSQLite
import Foundation
import Testing

/// `cmdbus journal backup FILE`: a copy that holds together while a server writes, where `cp`
/// of a journal in use can tear one, and that never overwrites a file.
struct JournalBackupTests {
    /// Three backups taken while a server takes a burst of posts: each is a whole SQLite file
    /// (`integrity_check`), a journal `cmdbus` reads on its own, holding what the server had
    /// committed when it started, no more than the journal holds at the end.
    @Test(.timeLimit(.minutes(3)))
    func aBackupTakenWhileAServerWritesIsAWholeJournal() async throws {
        let server = try await ServerTests.Server(arguments: ["--durability", "deferred"])
        defer { server.work.remove() }
        let input = server.work.file("posts.ndjson")
        try (1...6_000).map { #"{"command": "greet", "payload": {"name": "n\#($0)"}}"# }.joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        async let posted = cmdbus(["batch", input.path, "--connect=\(server.socket)", "--no-wait"], directory: server.work.url)

        var counts: [Int] = []
        for copy in 1...3 {
            let file = server.work.file("copy\(copy).sqlite").path
            let backup = try await cmdbus(["journal", "backup", file, "--journal", server.journal, "--json"], directory: server.work.url)
            #expect(backup.status == 0, "\(backup.stderr)")
            let report = try jsonObject(backup.stdout)
            let entries = try #require(report["entries"] as? Int)
            #expect(report["backup"] as? String == file && (report["bytes"] as? Int ?? 0) > 0)
            #expect(try Self.integrity(of: file) == "ok")
            let listed = try await cmdbus(["journal", "list", "--json", "--journal", file], directory: server.work.url)
            try #require(listed.status == 0, "\(listed.stderr)")
            #expect((try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [Any])?.count == entries, "the copy lists what it holds")
            counts.append(entries)
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(try await posted.status == 0)
        await server.stop()
        let final = try SQLiteDatabase(path: server.journal, create: false, readOnly: true)
        defer { final.close() }
        let total = try final.integer("SELECT count(*) FROM entries")
        #expect(total == 6_000)
        #expect(counts == counts.sorted() && counts.allSatisfy { Int64($0) <= total }, "\(counts) of \(total)")
    }

    static func integrity(of path: String) throws -> String? {
        let database = try SQLiteDatabase(path: path, create: false, readOnly: true)
        defer { database.close() }
        let check = try database.prepare("PRAGMA integrity_check")
        return try check.step() ? check.string(0) : nil
    }

    /// A file already there is never overwritten, a directory that is not there leaves no file
    /// behind, and the shared bus is pointed at PostgreSQL's own tools; each in one line.
    @Test func aBackupRefusesWhatItCannotDoWithoutTouchingAnything() async throws {
        let setup = try JournalReliabilityTests.Setup()
        defer { setup.work.remove() }
        _ = try await setup.run("run", "greet", "-p", "name=Ada")
        let existing = setup.work.file("existing.sqlite")
        try Data("keep me".utf8).write(to: existing)
        let refused = try await setup.run("journal", "backup", existing.path)
        #expect(refused.status == 64)
        #expect(refused.stderr == "cmdbus: error: '\(existing.path)' exists; 'cmdbus journal backup' never overwrites a file: name a new one, or remove this one first\n")
        #expect(try Data(contentsOf: existing) == Data("keep me".utf8))

        let nowhere = setup.work.file("missing/copy.sqlite").path
        let failed = try await setup.run("journal", "backup", nowhere)
        #expect(failed.status == 74)
        #expect(failed.stderr.hasPrefix("cmdbus: error: journal \(nowhere): cannot be opened") && failed.stderr.contains("check that its directory exists"), "\(failed.stderr)")
        #expect(failed.stderr.split(separator: "\n").count == 1)

        let none = try await setup.run("journal", "backup")
        #expect(none.status == 64 && none.stderr.contains("takes one file to write the copy to"), "\(none.stderr)")
        let bus = try await cmdbus(["journal", "backup", setup.work.file("b.sqlite").path, "--bus", "postgres://nobody@127.0.0.1:1/none"], directory: setup.work.url)
        #expect(bus.status == 64 && bus.stderr.contains("pg_dump --schema=cmdbus"), "\(bus.stderr)")
        #expect(!FileManager.default.fileExists(atPath: setup.work.file("b.sqlite").path))

        let made = try await setup.run("journal", "backup", setup.work.file("copy.sqlite").path)
        #expect(made.status == 0 && made.stdout.hasPrefix("backed up 1 entry of "), "\(made.stdout)\(made.stderr)")
    }
}
