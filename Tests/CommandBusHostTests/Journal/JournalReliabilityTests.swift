import CommandBusSQLite
import CommandBusSupport
import Foundation
import Testing

/// The journal under stress, through the real `cmdbus` binary and real SQLite files.
struct JournalReliabilityTests {
    /// A directory with the Counter, Greeter and fixture plugins, and a journal path beside it.
    struct Setup {
        let work: TemporaryDirectory
        let plugins: TemporaryDirectory
        var journal: String { work.file("journal.sqlite").path }

        init() throws {
            work = try TemporaryDirectory("cmdbus-journal")
            plugins = try work.subdirectory("plugins")
            try plugins.install("libCounter.so", "libGreeter.so", "libFixturePlugin.so")
        }

        func run(_ arguments: String...) async throws -> ProcessResult {
            try await run(arguments)
        }

        func run(_ arguments: [String]) async throws -> ProcessResult {
            try await cmdbus(arguments + ["--journal", journal, "--plugins", plugins.path], directory: work.url)
        }

        func counter(_ name: String) async throws -> Int {
            let result = try await run("run", "counter.get", "-p", "counter=\(name)")
            try #require(result.status == 0, "counter.get failed: \(result.stderr)")
            return try #require(try jsonObject(result.stdout)["value"] as? Int)
        }

        func entries(command: String? = nil) async throws -> [[String: Any]] {
            var arguments = ["journal", "list", "--json", "--journal", journal]
            if let command { arguments += ["--command", command] }
            let listing = try await cmdbus(arguments, directory: work.url)
            try #require(listing.status == 0, "journal list failed: \(listing.stderr)")
            return try #require(try JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]])
        }

        func batchFile(_ lines: Int, counter: String) throws -> String {
            let url = work.file("batch-\(counter).ndjson")
            let line = #"{"command":"counter.add","payload":{"counter":"\#(counter)","by":1}}"#
            try String(repeating: line + "\n", count: lines).write(to: url, atomically: true, encoding: .utf8)
            return url.path
        }
    }

    /// `deferred` syncs only endings: its unsynced write-ahead must survive the process dying all the same.
    @Test(.timeLimit(.minutes(5)), arguments: ["batched", "deferred"])
    func killNineMidBatchLosesNoAcknowledgedCommand(durability: String) async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        // Far more than the batch runs before the kill: on a fast machine ten thousand finished
        // before the loop below saw the thousandth line.
        let input = try setup.batchFile(100_000, counter: "k")
        let output = setup.work.file("batch.out")
        let process = try launchedChild(
            try TestPaths.product("cmdbus").path,
            ["batch", input, "--journal", setup.journal, "--plugins", setup.plugins.path, "--durability", durability],
            directory: setup.work.path, standardOutput: .file(output.path), standardError: .discard
        )
        // Kill it partway: once a thousand commands are acknowledged, long before all are.
        var printed = 0
        while process.isRunning && printed < 1_000 {
            try await Task.sleep(for: .milliseconds(5))
            printed = (try? Data(contentsOf: output))?.split(separator: UInt8(ascii: "\n")).count ?? 0
        }
        try #require(process.isRunning, "the batch finished before it could be killed")
        process.send(SIGKILL)
        #expect(await process.wait() == .signaled(SIGKILL))

        // Acknowledged: every whole line printed before the kill.
        let text = try String(contentsOf: output, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true).dropLast(text.hasSuffix("\n") ? 0 : 1)
        let acknowledged = Set(lines.compactMap { try? jsonObject(String($0))["id"] as? String })
        #expect(acknowledged.count == lines.count && acknowledged.count >= 1_000 && acknowledged.count < 100_000)

        // A one-shot command only reports what the dead batch left; `journal recover` runs it again.
        // (A kill can land between group commits, with nothing in flight: then there is nothing to report.)
        // A deferred journal's SQLite file lags its log (``JournalLog``) until a command opens it.
        if durability == "deferred" { _ = try await setup.entries() }
        let database = try SQLiteDatabase(path: setup.journal, create: false, readOnly: true)
        let left = try database.integer("SELECT count(*) FROM entries WHERE state IN ('pending', 'running')")
        database.close()
        let reported = try await setup.run("run", "counter.get", "-p", "counter=k")
        if left > 0 {
            #expect(reported.stderr.contains("\(left) command\(left == 1 ? "" : "s") a process that died left unfinished"), "\(reported.stderr)")
            #expect(reported.stderr.contains("'cmdbus journal recover' runs them"))
        } else {
            #expect(!reported.stderr.contains("left unfinished"), "\(reported.stderr)")
        }
        let recovered = try await setup.run("journal", "recover")
        #expect(recovered.status == 0, "\(recovered.stderr)")
        let value = try await setup.counter("k")
        let entries = try await setup.entries(command: "counter.add")
        let succeeded = entries.filter { $0["state"] as? String == "succeeded" }.compactMap { $0["id"] as? String }
        #expect(Set(succeeded).count == succeeded.count, "an id succeeded twice")
        #expect(acknowledged.isSubset(of: Set(succeeded)), "an acknowledged command was lost")
        #expect(entries.allSatisfy { ["succeeded"].contains($0["state"] as? String) }, "entries left unfinished")
        #expect(value == succeeded.count)
    }

    /// A server acknowledges a post once the journal has its write-ahead, so a post it
    /// acknowledged is in the journal even if it is killed at once after: with the default
    /// durability (the write-ahead synced) and `deferred` (written, alone or in the round of a
    /// sync the log makes for other commands' endings). The burst's last hundred posts sleep, so
    /// no ending's sync follows them; the client kills the server as soon as it has read the last
    /// acknowledgement, before SQLite's own commit of them (within a few milliseconds) could.
    /// Whether a kill lands before that commit depends on timing: a server that acknowledged
    /// posts at once failed about one round in three, so the test makes three.
    @Test(.timeLimit(.minutes(5)), arguments: ["batched", "deferred"])
    func aServerKilledAtOnceAfterABurstOfPostsKeepsEveryAcknowledgedOne(durability: String) async throws {
        for _ in 0..<3 { try await Self.killAtOnceAfterABurstOfPosts(durability: durability) }
    }

    static func killAtOnceAfterABurstOfPosts(durability: String) async throws {
        let server = try await ServerTests.Server(arguments: ["--durability", durability])
        defer { server.work.remove() }
        let output = try await server.client("""
            import os, signal
            s, f = connect()
            lines = []
            for i in range(2000):
                if i % 4 == 0 or i >= 1900:
                    lines.append(json.dumps({"id": i, "op": "post", "command": "fixture.sleep", "payload": {"milliseconds": 600000}}))
                else:
                    lines.append(json.dumps({"id": i, "op": "post", "command": "greet", "payload": {"name": "n%d" % i}}))
            s.sendall(("\\n".join(lines) + "\\n").encode())
            replies = [json.loads(f.readline()) for i in range(2000)]
            os.kill(int(sys.argv[2]), signal.SIGKILL)
            for reply in replies:
                print(reply["commandId"] if reply["ok"] else "refused: " + reply["error"]["message"])
            """, String(server.process.pid))
        #expect(await server.process.wait() == .signaled(SIGKILL))
        let acknowledged = output.split(separator: "\n").map(String.init)
        let refused = acknowledged.filter { $0.hasPrefix("refused") }
        #expect(acknowledged.count == 2_000 && refused.isEmpty, "\(refused.first ?? "")")

        // Opening the journal for writing applies what a deferred journal's log holds.
        _ = try SQLiteJournal(path: server.journal, durability: durability == "deferred" ? .deferred : .batched(maxDelay: .zero))
        let database = try SQLiteDatabase(path: server.journal, create: false, readOnly: true)
        defer { database.close() }
        let statement = try database.prepare("SELECT id FROM entries")
        var journaled = Set<String>()
        while try statement.step() { journaled.insert(statement.string(0) ?? "") }
        let lost = Set(acknowledged).subtracting(journaled)
        #expect(lost.count == 0, "\(lost.count) acknowledged posts are not in the journal")
    }

    /// Found by hand: a prune that removed the newest entries let the next commands take their
    /// numbers again, at or below the entry recovery had swept to, and a command a killed process
    /// left unfinished there was never run again ("nothing to recover"). The newest entry's tree
    /// now stays, so entry numbers only grow and recovery looks where new work is.
    @Test(.timeLimit(.minutes(3)))
    func workAfterAPruneOfEverythingIsRecoveredAfterAKill() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        #expect(try await setup.run("batch", try setup.batchFile(100, counter: "p")).status == 0)
        // Opening the file again sweeps past those hundred (more than 64 since the last sweep).
        #expect(try await setup.run("run", "greet", "-p", "name=Ada").status == 0)
        let pruned = try await setup.run("journal", "prune", "--older-than", "0")
        #expect(pruned.stdout.hasPrefix("removed 100 entries"), "\(pruned.stdout)\(pruned.stderr)")
        let (number, recovered) = try await Self.killMidRunAndRecover(setup)
        #expect(number == 102, "entry numbers are given once")
        #expect(recovered.status == 0 && recovered.stdout.contains("succeeded  fixture.sleep"), "\(recovered.stdout) \(recovered.stderr)")
    }

    /// A journal a prune of an earlier version left with its sweep's mark past the newest entry
    /// is mended as it opens: work written since is found by recovery all the same.
    @Test(.timeLimit(.minutes(3)))
    func aSweepMarkPastTheNewestEntryIsMendedAsTheJournalOpens() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        #expect(try await setup.run("batch", try setup.batchFile(100, counter: "m")).status == 0)
        #expect(try await setup.run("run", "greet", "-p", "name=Ada").status == 0)
        // As such a prune left it: every entry gone, the mark where the sweep had put it.
        let emptied = try await runProcess("/usr/bin/env", ["python3", "-c", """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            c.executescript("DELETE FROM endings; DELETE FROM unended; DELETE FROM commands;")
            print(c.execute("SELECT through FROM sweep").fetchone()[0])
            """, setup.journal])
        try #require(emptied.status == 0 && emptied.stdout == "100\n", "\(emptied.stdout) \(emptied.stderr)")
        let (number, recovered) = try await Self.killMidRunAndRecover(setup)
        #expect(number == 1)
        #expect(recovered.status == 0 && recovered.stdout.contains("succeeded  fixture.sleep"), "\(recovered.stdout) \(recovered.stderr)")
    }

    /// Runs a command that waits, kills its `cmdbus run` once the journal has it running, and
    /// runs `journal recover` with the wait released; returns the command's entry number and
    /// what the recovery said.
    static func killMidRunAndRecover(_ setup: Setup) async throws -> (number: Int?, recovered: ProcessResult) {
        let released = setup.work.file("released").path
        let sleeper = try launchedChild(
            try TestPaths.product("cmdbus").path,
            ["run", "fixture.sleep", "-p", "milliseconds=120000", "-p", "stubborn=true", "-p", "untilFileExists=\(released)", "--journal", setup.journal, "--plugins", setup.plugins.path],
            directory: setup.work.path, standardOutput: .discard, standardError: .discard
        )
        var entry: [String: Any]?
        for _ in 0..<400 where entry?["state"] as? String != "running" {
            entry = try await setup.entries(command: "fixture.sleep").first
            if entry?["state"] as? String != "running" { try await Task.sleep(for: .milliseconds(25)) }
        }
        try #require(entry?["state"] as? String == "running", "the command never started: \(String(describing: entry))")
        sleeper.send(SIGKILL)
        #expect(await sleeper.wait() == .signaled(SIGKILL))
        #expect(FileManager.default.createFile(atPath: released, contents: nil))
        return (entry?["sequence"] as? Int, try await setup.run("journal", "recover"))
    }

    @Test func twoWritersLoseNoWrites() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        let first = try setup.batchFile(300, counter: "w")
        let second = setup.work.file("second.ndjson").path
        try FileManager.default.copyItem(atPath: first, toPath: second)
        async let a = setup.run("batch", first)
        async let b = setup.run("batch", second)
        let (one, two) = try await (a, b)
        #expect(one.status == 0 && two.status == 0, "first: \(one.stderr.suffix(600)) second: \(two.stderr.suffix(600))")
        #expect(try await setup.counter("w") == 600)
        #expect(try await setup.entries(command: "counter.add").count == 600)
    }

    @Test(arguments: ["text", "truncated", "corrupt", "corruptPages", "foreign", "newer"])
    func aDamagedJournalIsRefusedAndLeftUntouched(kind: String) async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        // A real journal with some entries first, for the truncated and corrupt cases.
        #expect(try await setup.run("batch", try setup.batchFile(200, counter: "d")).status == 0)
        let path = setup.journal
        _ = try await cmdbus(["journal", "list", "--journal", path], directory: setup.work.url)  // checkpoint-free read
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        try? FileManager.default.removeItem(atPath: path + "-wal")
        try? FileManager.default.removeItem(atPath: path + "-shm")
        switch kind {
        case "text": bytes = Data("this is not a journal\n".utf8)
        case "truncated": bytes = bytes.prefix(bytes.count / 2)
        case "corrupt": bytes.replaceSubrange(0..<100, with: Data(repeating: 0x5A, count: 100))
        case "corruptPages": bytes.replaceSubrange(4096..<bytes.count, with: Data(repeating: 0xA5, count: bytes.count - 4096))
        case "newer":
            // A journal a later cmdbus wrote: its schema version is past the one this one reads.
            let made = try await runProcess("/usr/bin/env", ["python3", "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA user_version = 99'); c.close()", path])
            try #require(made.status == 0, "\(made.stderr)")
            bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        default:
            let made = try await runProcess("/usr/bin/env", ["python3", "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table t(x)'); c.commit()", path + ".foreign"])
            try #require(made.status == 0, "\(made.stderr)")
            bytes = try Data(contentsOf: URL(fileURLWithPath: path + ".foreign"))
        }
        try bytes.write(to: URL(fileURLWithPath: path))
        let result = try await setup.run("run", "greet", "-p", "name=Ada")
        #expect(result.status == 74, "stderr: \(result.stderr)")
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.split(separator: "\n").count == 1)
        #expect(result.stderr.contains("journal \(path)") && result.stderr.contains("left untouched"), "stderr: \(result.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "the damaged journal was written to")
        // A short text file is some other file, not a journal cut short (it was called truncated).
        let reason = [
            "text": "is not an SQLite database", "truncated": "is truncated",
            "newer": "has journal schema version 99, newer than this cmdbus reads (\(SQLiteJournal.schemaVersion)); it was left untouched: open it with the newer cmdbus",
        ][kind]
        if let reason { #expect(result.stderr.contains(reason), "stderr: \(result.stderr)") }
    }

    /// A process killed while SQLite copied its write-ahead log into the journal (a checkpoint)
    /// leaves a file whose first page already gives the new size, before the pages that reach
    /// it are written; SQLite reads those from the log. Such a journal opens and keeps every
    /// entry; it was refused as truncated (a server killed at once in a CI run could not be
    /// opened again). Made here the way the checkpoint leaves it: the journal's pages in its log,
    /// its file's header claiming ten times its size.
    @Test func aJournalKilledMidCheckpointOpensFromItsLog() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        #expect(try await setup.run("batch", try setup.batchFile(200, counter: "c")).status == 0)
        let copy = setup.work.file("copy.sqlite").path
        let made = try await runProcess("/usr/bin/env", ["python3", "-c", """
            import shutil, sqlite3, sys
            source, copy = sys.argv[1], sys.argv[2]
            c = sqlite3.connect(source, isolation_level=None)
            c.execute("PRAGMA wal_autocheckpoint=0")
            c.execute("CREATE TABLE IF NOT EXISTS scratch (x)")
            c.execute("INSERT INTO scratch SELECT randomblob(200) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) SELECT i FROM n)")
            shutil.copyfile(source, copy); shutil.copyfile(source + '-wal', copy + '-wal')
            c.close()
            with open(copy, 'r+b') as f:
                header = bytearray(f.read(100))
                size = len(open(copy, 'rb').read())
                page = int.from_bytes(header[16:18], 'big')
                header[28:32] = (size // page * 10).to_bytes(4, 'big')
                header[92:96] = header[24:28]
                f.seek(0); f.write(header)
            """, setup.journal, copy])
        try #require(made.status == 0, "\(made.stderr)")
        let listing = try await cmdbus(["journal", "list", "--json", "--limit", "1000", "--journal", copy], directory: setup.work.url)
        #expect(listing.status == 0, "\(listing.stderr)")
        let entries = (try? JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]]) ?? []
        #expect(entries.count == 200, "\(listing.stdout.prefix(300))")
    }

    @Test func aStalePayloadIsMarkedFailedAndTheReplayGoesOn() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        #expect(try await setup.run("run", "counter.add", "-p", "counter=s", "-p", "by=2").status == 0)
        // An entry written by an older plugin whose payload the current one no longer decodes.
        let stale = UUID().uuidString
        let inserted = try await runProcess("/usr/bin/env", ["python3", "-c", """
            import sqlite3, sys, time
            c = sqlite3.connect(sys.argv[1]); now = time.time()
            c.execute("insert into commands (id, name, correlation_id, created_at, payload, state, attempts, accepted_at, updated_at) values (?, 'counter.add', ?, ?, ?, 'succeeded', 1, ?, ?)",
                      (sys.argv[2], sys.argv[2], now, b'{"counter": 7, "amount": "x"}', now, now))
            c.commit()
            """, setup.journal, stale])
        try #require(inserted.status == 0, "\(inserted.stderr)")
        #expect(try await setup.run("run", "counter.add", "-p", "counter=s", "-p", "by=3").status == 0)
        let value = try await setup.counter("s")
        #expect(value == 5)
        let show = try await cmdbus(["journal", "show", stale, "--journal", setup.journal], directory: setup.work.url)
        let entry = try jsonObject(show.stdout)
        #expect(entry["state"] as? String == "failed")
        #expect(((entry["error"] as? [String: Any])?["message"] as? String)?.contains("stale payload") == true)

        let replay = try await cmdbus(["journal", "replay", "--json", "--journal", setup.journal, "--plugins", setup.plugins.path], directory: setup.work.url)
        #expect(try jsonObject(replay.stdout) as NSDictionary == ["replayed": 2, "failed": 0, "sentByParents": 0] as NSDictionary)
    }
}
