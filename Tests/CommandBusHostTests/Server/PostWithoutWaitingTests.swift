import Foundation
import Testing

extension ServerTests {
    /// A post is acknowledged once the journal has it, unless it asks for `"ack": "received"`:
    /// with the journal's file locked by another process, the post that asked is acknowledged at
    /// once and the one that did not waits until the lock is let go; both run.
    @Test func aPostThatAsksToBeAcknowledgedOnReceiptDoesNotWaitForTheJournal() async throws {
        let server = try await Server()
        defer { server.work.remove() }
        let output = try await server.client("""
            import select, sqlite3
            s, f = connect()
            print(ask(f, {"id": 1, "op": "send", "command": "greet", "payload": {"name": "Warm"}})["ok"])
            lock = sqlite3.connect(sys.argv[2], timeout=30, isolation_level=None)
            lock.execute("BEGIN IMMEDIATE")
            print(ask(f, {"id": 2, "op": "post", "command": "greet", "payload": {"name": "Ada"}, "ack": "received"})["ok"])
            f.write(json.dumps({"id": 3, "op": "post", "command": "greet", "payload": {"name": "Lin"}}) + '\\n'); f.flush()
            ready, _, _ = select.select([s], [], [], 1.5)
            print("acknowledged under the lock" if ready else "waits for the journal")
            lock.execute("ROLLBACK")
            reply = json.loads(f.readline())
            print(reply["id"], reply["ok"])
            """, server.journal)
        await server.stop()
        #expect(output == """
            True
            True
            waits for the journal
            3 True

            """)
        // Stopping drains: both posts ran.
        let listing = try await cmdbus(["journal", "list", "--json", "--journal", server.journal], directory: server.work.url)
        let entries = (try? JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]]) ?? []
        #expect(entries.count == 3 && entries.allSatisfy { $0["state"] as? String == "succeeded" }, "\(listing.stdout)")
    }

    /// Asking to be acknowledged on receipt does not acknowledge a post no handler takes: it
    /// is refused, as a post that waits for the journal is, and kept as a dead letter.
    @Test(arguments: ["received", "journaled"])
    func aPostNoHandlerTakesIsRefusedWhateverAcknowledgementItAsksFor(ack: String) async throws {
        let server = try await Server()
        defer { server.work.remove() }
        let output = try await server.client("""
            s, f = connect()
            reply = ask(f, {"id": 1, "op": "post", "command": "nobody.takes", "payload": {}, "ack": sys.argv[2]})
            print(reply["ok"], reply["error"]["code"], reply["commandId"] is not None)
            """, ack)
        await server.stop()
        #expect(output == "False noHandler True\n")
        let listing = try await cmdbus(["journal", "list", "--json", "--journal", server.journal], directory: server.work.url)
        let entries = (try? JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]]) ?? []
        #expect(entries.count == 1 && entries.first?["state"] as? String == "failed", "\(listing.stdout)")
    }

    /// `cmdbus run --no-wait --connect` prints the command's id once the server has it and
    /// returns while the command still runs; a command no handler takes is still refused. One
    /// whose registered handler declines its payload is taken, and fails when it runs.
    @Test func runWithoutWaitingPrintsTheIdWhileTheServerRunsTheCommand() async throws {
        let server = try await Server()
        defer { server.work.remove() }
        let connect = "--connect=\(server.socket)"
        let posted = try await cmdbus(["run", "fixture.sleep", "-p", "milliseconds=5000", "--no-wait", connect])
        #expect(posted.status == 0, "\(posted.stderr)")
        let id = try #require(UUID(uuidString: posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(posted.stdout)")
        let status = try jsonObject(try await cmdbus(["status", "--json", connect]).stdout)
        #expect(status["inFlight"] as? Int == 1, "\(status)")
        let json = try await cmdbus(["run", "greet", "-p", "name=Ada", "--no-wait", "--json", connect])
        let jsonID = try jsonObject(json.stdout)["commandId"] as? String
        #expect(json.status == 0 && jsonID.flatMap(UUID.init(uuidString:)) != nil, "\(json.stdout)")
        let nope = try await cmdbus(["run", "nope", "--no-wait", connect])
        #expect(nope.status == 69 && nope.stderr.contains("nope"), "\(nope.stderr)")
        let declined = try await cmdbus(["run", "greet", "-p", "name=", "--no-wait", connect])
        let declinedID = declined.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(declined.status == 0 && UUID(uuidString: declinedID) != nil, "\(declined.stdout)\(declined.stderr)")
        await server.stop()
        // Stopping drains: the posted command ran to its end.
        let listing = try await cmdbus(["journal", "list", "--json", "--journal", server.journal], directory: server.work.url)
        let entries = (try? JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]]) ?? []
        #expect(entries.contains { $0["id"] as? String == id.uuidString && $0["state"] as? String == "succeeded" }, "\(listing.stdout)")
        let declinedEntry = entries.first { $0["id"] as? String == declinedID }
        #expect(declinedEntry?["state"] as? String == "failed", "\(listing.stdout)")
        #expect((declinedEntry?["error"] as? [String: Any])?["code"] as? String == "noHandler", "\(listing.stdout)")
    }

    /// `cmdbus batch --no-wait --connect` prints a `pending` line with each command's id once the
    /// server has it, and a `failed` one for a line no handler takes or that is not a command;
    /// the posted commands run on the server.
    @Test func aBatchWithoutWaitingPostsEachLine() async throws {
        let server = try await Server()
        defer { server.work.remove() }
        let input = server.work.file("batch.ndjson")
        try Data("""
            {"command": "fixture.sleep", "payload": {"milliseconds": 5000}}
            {"command": "nope"}
            not a command
            {"command": "fixture.sleep", "payload": {"milliseconds": 5000}}

            """.utf8).write(to: input)
        let posted = try await cmdbus(["batch", input.path, "--no-wait", "--connect=\(server.socket)"])
        #expect(posted.status == 1 && posted.stderr.contains("2 of the batch's commands did not post"), "\(posted.stderr)")
        let lines = try posted.stdout.split(separator: "\n").map { try jsonObject(String($0)) }.sorted { ($0["line"] as? Int ?? 0) < ($1["line"] as? Int ?? 0) }
        #expect(lines.map { $0["line"] as? Int } == [1, 2, 3, 4])
        #expect(lines.map { $0["state"] as? String } == ["pending", "failed", "failed", "pending"])
        #expect((lines[1]["error"] as? [String: Any])?["code"] as? String == "noHandler")
        let ids = [lines[0], lines[3]].compactMap { ($0["id"] as? String).flatMap(UUID.init(uuidString:)) }
        #expect(ids.count == 2)
        let status = try jsonObject(try await cmdbus(["status", "--json", "--connect=\(server.socket)"]).stdout)
        #expect(status["inFlight"] as? Int == 2, "\(status)")
        await server.stop()
        let listing = try await cmdbus(["journal", "list", "--json", "--state", "succeeded", "--journal", server.journal], directory: server.work.url)
        let succeeded = ((try? JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String }
        #expect(Set(succeeded) == Set(ids.map(\.uuidString)), "\(listing.stdout)")
    }

    /// `--no-wait` needs a bus that outlives the run, and a delay the server cannot keep.
    @Test func runWithoutWaitingIsRefusedWhereNothingWouldKeepTheCommand() async throws {
        let local = try await cmdbus(["run", "greet", "-p", "name=Ada", "--no-wait", "--no-journal"])
        #expect(local.status == 64 && local.stderr.contains("--no-wait needs a bus that outlives this run"), "\(local.stderr)")
        let batch = try await cmdbus(["batch", "-", "--no-wait", "--no-journal"])
        #expect(batch.status == 64 && batch.stderr.contains("--no-wait needs a bus that outlives this batch"), "\(batch.stderr)")
        let delayed = try await cmdbus(["run", "greet", "--no-wait", "--delay", "5", "--connect=/nonexistent.sock"])
        #expect(delayed.status == 64 && delayed.stderr.contains("cannot go with --no-wait"), "\(delayed.stderr)")
    }
}

extension SharedBusTests {
    /// `cmdbus run --no-wait --bus` and `batch --no-wait --bus` leave their commands pending in
    /// PostgreSQL with no host up, and a host started later runs them, a delay kept.
    @Test(.timeLimit(.minutes(3)))
    func runWithoutWaitingLeavesTheCommandForAHostStartedLater() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let posted = try await Self.bus(database.url, "run", "fixture.whoami", "--delay", "1500ms", "--no-wait")
        #expect(posted.status == 0, "\(posted.stderr)")
        let id = try #require(UUID(uuidString: posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(posted.stdout)")
        let pending = try await database.sql("SELECT state FROM cmdbus.commands WHERE id = '\(id.uuidString.lowercased())'")
        #expect(pending == "pending\n")
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let input = scratch.file("batch.ndjson")
        // Enough posts on many tasks at once to have crashed a release build that posted through a
        // protocol extension's default (`92feb73`).
        try Data(String(repeating: #"{"command": "fixture.whoami"}"# + "\n", count: 300).utf8).write(to: input)
        let batch = try await Self.bus(database.url, "batch", input.path, "--no-wait", "-c", "16")
        #expect(batch.status == 0 && batch.stdout.split(separator: "\n").count == 300, "\(batch.stderr)")
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'pending'") == "301\n")
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"])
        let ran = await waitUntil(.seconds(60)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'succeeded'")) == "301\n"
        }
        #expect(ran)
        let waited = try await database.sql("SELECT started_at - created_at >= interval '1.4 seconds' FROM cmdbus.commands WHERE id = '\(id.uuidString.lowercased())'")
        #expect(waited == "t\n")
        await host.stop()
        await database.drop()
    }

    /// A `batch --no-wait` through the shared bus while PostgreSQL stops for 3 s and starts again:
    /// each post retries until the database is back, so every line is posted exactly once. The
    /// lines come through a pipe, 30 every 10 ms, so the batch is still posting at the restart.
    @Test(.timeLimit(.minutes(3)))
    func aBatchPostedThroughARestartOfTheDatabasePostsEveryLineOnce() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let input = scratch.file("batch.fifo")
        #expect(mkfifo(input.path, 0o600) == 0)
        // The schema first, so the test can count what the batch has posted.
        #expect(try await Self.bus(database.url, "bus", "status").status == 0)
        async let written = runProcess("/usr/bin/env", ["python3", "-c", """
            import sys, time
            with open(sys.argv[1], 'w') as out:
                for start in range(1, 6001, 30):
                    out.write(''.join('{"command": "fixture.whoami", "payload": {"n": %d}}\\n' % n for n in range(start, start + 30)))
                    out.flush(); time.sleep(0.01)
            """, input.path])
        async let batch = Self.bus(database.url, "batch", input.path, "--no-wait", "-c", "4")
        // Stopped once the batch is posting, so the restart meets its posts (its client's start
        // would wait out a restart on its own).
        let posting = await waitUntil(.seconds(60), every: .milliseconds(20)) {
            (try? await database.sql("SELECT count(*) >= 100 FROM cmdbus.commands")) == "t\n"
        }
        #expect(posting)
        let before = try await database.sql("SELECT count(*) FROM cmdbus.commands")
        try await Self.restartPostgres(down: .seconds(3))
        let posted = try await batch
        #expect(try await written.status == 0)
        #expect(posted.status == 0, "\(posted.stderr)")
        let lines = posted.stdout.split(separator: "\n")
        #expect(lines.count == 6000 && lines.allSatisfy { $0.contains(#""state":"pending""#) })
        #expect(try await database.sql("SELECT count(*), count(DISTINCT payload) FROM cmdbus.commands") == "6000|6000\n")
        // The restart came while the batch was posting: not every line was in before it.
        #expect((Int(before.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 6000) < 6000, "\(before)")
        await database.drop()
    }

    /// A batch read from a file posts what is ready together: 20,000 lines in a few hundred
    /// transactions at most (a statement per line made 20,000), every line once, and (one
    /// statement at a time, `-c 1`) in the file's order.
    @Test(.timeLimit(.minutes(3)))
    func aBatchFromAFilePostsItsLinesTogetherInOrder() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let input = scratch.file("batch.ndjson")
        try Data((1...20_000).map { #"{"command": "fixture.whoami", "payload": {"n": \#($0)}}"# + "\n" }.joined().utf8).write(to: input)
        let posted = try await Self.bus(database.url, "batch", input.path, "--no-wait", "-c", "1")
        #expect(posted.status == 0, "\(posted.stderr)")
        let lines = try posted.stdout.split(separator: "\n").map { try jsonObject(String($0)) }
        #expect(lines.count == 20_000 && Set(lines.compactMap { $0["id"] as? String }).count == 20_000)
        #expect(Set(lines.compactMap { $0["line"] as? Int }) == Set(1...20_000))
        let counts = try await database.sql("""
            SELECT count(*), count(DISTINCT payload), count(DISTINCT xmin::text) <= 200 FROM cmdbus.commands WHERE state = 'pending'
            """)
        #expect(counts == "20000|20000|t\n")
        // Posted in the file's order: the bus's sequence follows the lines.
        let ordered = try await database.sql("""
            SELECT bool_and(n > previous) FROM (
                SELECT (convert_from(payload, 'UTF8')::jsonb ->> 'n')::int AS n,
                    lag((convert_from(payload, 'UTF8')::jsonb ->> 'n')::int, 1, 0) OVER (ORDER BY seq) AS previous
                FROM cmdbus.commands) ordered
            """)
        #expect(ordered == "t\n")
        await database.drop()
    }

    /// A line that comes alone through a pipe is posted at once, not held for company: the
    /// bus has the first line while the writer still holds the pipe open.
    @Test(.timeLimit(.minutes(2)))
    func aLineThatComesAloneIsPostedAtOnce() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let input = scratch.file("batch.fifo")
        #expect(mkfifo(input.path, 0o600) == 0)
        #expect(try await Self.bus(database.url, "bus", "status").status == 0)
        async let batch = Self.bus(database.url, "batch", input.path, "--no-wait")
        // Read and write, so opening does not wait for the batch to open its end (Linux allows it).
        let descriptor = open(input.path, O_RDWR | O_CLOEXEC)
        try #require(descriptor >= 0)
        let writer = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        writer.write(Data((#"{"command": "fixture.whoami", "payload": {"n": 1}}"# + "\n").utf8))
        let first = await waitUntil(.seconds(30)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands")) == "1\n"
        }
        #expect(first, "the first line was not posted while the pipe stayed open")
        writer.write(Data((#"{"command": "fixture.whoami", "payload": {"n": 2}}"# + "\n").utf8))
        try writer.close()
        let posted = try await batch
        #expect(posted.status == 0 && posted.stdout.split(separator: "\n").count == 2, "\(posted.stderr)")
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands") == "2\n")
        await database.drop()
    }

    /// A batch line's metadata reaches the bus: with an idempotency key on each line, posting
    /// the same file again posts nothing new and prints the first run's ids.
    @Test(.timeLimit(.minutes(2)))
    func aBatchPostedAgainWithIdempotencyKeysPostsNothingNew() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let input = scratch.file("batch.ndjson")
        try Data((1...500).map {
            #"{"command": "fixture.whoami", "payload": {"n": \#($0)}, "metadata": {"idempotency-key": "order-\#($0 % 400)", "source": "feed"}}"# + "\n"
        }.joined().utf8).write(to: input)
        func ids(_ result: ProcessResult) throws -> [Int: String] {
            try Dictionary(uniqueKeysWithValues: result.stdout.split(separator: "\n").map {
                let line = try jsonObject(String($0))
                return (line["line"] as? Int ?? 0, line["id"] as? String ?? "")
            })
        }
        let first = try await Self.bus(database.url, "batch", input.path, "--no-wait")
        let again = try await Self.bus(database.url, "batch", input.path, "--no-wait")
        #expect(first.status == 0 && again.status == 0, "\(first.stderr) \(again.stderr)")
        let (one, two) = (try ids(first), try ids(again))
        #expect(one.count == 500 && one == two)
        // Lines 400 to 500 repeat the keys of lines 0 to 100: each got the first line's id.
        #expect((400...500).allSatisfy { one[$0] == one[$0 % 400 == 0 ? 400 : $0 % 400] })
        #expect(try await database.sql("SELECT count(*), count(*) FILTER (WHERE metadata ->> 'source' = 'feed') FROM cmdbus.commands") == "400|400\n")
        await database.drop()
    }
}
