import CommandBus
@testable import CommandBusPostgres
import Foundation
import Synchronization
import Testing

extension SharedBusTests {
    /// A command put on the bus wakes the hosts of its name (`cmdbus_new`) unless commands of the
    /// name have waited past ``BusSQL/backlogAge``. It used to skip the wake-up whenever one was
    /// merely ready: when that one's claim committed just before this insert did, the host's next
    /// claim missed it and the host slept until its poll (1 in 50 subcommands of a long run of
    /// `greet-all`s waited a second so).
    @Test(.timeLimit(.minutes(2)))
    func aNewCommandWakesTheHostsUnlessABacklogWaits() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        let listener = try database.listening(on: "cmdbus_new")
        func post(_ name: String) throws {
            var submission = BusSubmission(name: name, payload: Data("{}".utf8))
            submission.failIfUnhandled = false
            try submission.submit(on: connection)
        }
        func wakeUps() throws -> [String] {
            try listener.notifications(waitingUpTo: .milliseconds(500)).filter { $0.channel == "cmdbus_new" }.map(\.payload)
        }
        try post("wake.me")
        #expect(try wakeUps() == ["wake.me"], "the first of its name")
        try post("wake.me")
        #expect(try wakeUps() == ["wake.me"], "the first is ready, and its claim may be committing now")
        try connection.execute("UPDATE cmdbus.commands SET run_at = now() - interval '1 second' WHERE name = 'wake.me'")
        try post("wake.me")
        #expect(try wakeUps() == [], "two have waited a second: the hosts are busy, and each claims again as it finishes one")
        try post("other.name")
        #expect(try wakeUps() == ["other.name"], "another name's backlog is not this one's")
    }

    /// A batch of subcommands goes on the bus in one statement, each as one `submit` puts it: its
    /// parent, tree, depth, metadata, timeout and attempts kept; failed at once (`noHandler`) if
    /// it must be handled now and no host handles its name, pending if it may wait; an id already
    /// on the bus left as it is; the hosts of each name woken once, and not those of a backlog.
    @Test(.timeLimit(.minutes(2)))
    func aBatchOfSubcommandsGoesOnTheBusInOneStatementAsEachWouldAlone() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        try connection.insertHost(UUID(), handling: ["handled", "busy"])
        try BusSubmission(name: "busy", payload: Data("{}".utf8)).submit(on: connection)
        try connection.execute("UPDATE cmdbus.commands SET run_at = now() - interval '1 second'")
        let listener = try database.listening(on: "cmdbus_new")
        let root = CommandEnvelope(commandName: "tree")
        func child(_ name: String, failIfUnhandled: Bool = true, id: UUID? = nil) -> BusSubmission {
            var envelope = CommandEnvelope(commandName: name, parent: root)
            envelope.metadata["who"] = name
            var submission = BusSubmission(child: envelope, payload: Data(#"{"name":"\#(name)"}"#.utf8))
            submission.failIfUnhandled = failIfUnhandled
            submission.timeout = .seconds(3)
            submission.maxAttempts = 2
            if let id { submission.id = id }
            return submission
        }
        let existing = try connection.execute("SELECT id FROM cmdbus.commands")[row: 0].uuid("id")
        try BusSubmission.submitSubcommands([
            child("handled"), child("handled"), child("nobody"), child("later", failIfUnhandled: false), child("busy"), child("busy", id: existing),
        ], on: connection)
        #expect(try await database.sql("""
            SELECT name, state, coalesce(error_code, '-'), depth, metadata->>'who', timeout_ms, max_attempts, convert_from(payload, 'UTF8')
            FROM cmdbus.commands WHERE parent_id = '\(root.id.uuidString)' ORDER BY name, state
            """) == """
            busy|pending|-|1|busy|3000|2|{"name":"busy"}
            handled|pending|-|1|handled|3000|2|{"name":"handled"}
            handled|pending|-|1|handled|3000|2|{"name":"handled"}
            later|pending|-|1|later|3000|2|{"name":"later"}
            nobody|failed|noHandler|1|nobody|3000|2|{"name":"nobody"}

            """)
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE correlation_id = '\(root.id.uuidString)'") == "5\n",
                "the id already on the bus is the first 'busy', left as it was")
        let names = try listener.notifications(waitingUpTo: .milliseconds(500)).filter { $0.channel == "cmdbus_new" }.map(\.payload)
        #expect(names.sorted() == ["handled", "later"], "once a name; 'busy' waits as a backlog; 'nobody' failed: \(names)")
    }

    /// A host's subcommands go on the bus from the poster's thread, those that wait together in
    /// one statement, each name waking its hosts once; a poster that cannot reach the bus (and
    /// is not to wait for it) says so to each one.
    @Test(.timeLimit(.minutes(2)))
    func subcommandsArePostedTogetherAndEachHearsHowItWent() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        let listener = try database.listening(on: "cmdbus_new")
        let root = CommandEnvelope(commandName: "tree")
        let poster = SubcommandPoster(url: database.url)
        defer { poster.stop() }
        let outcomes = Mutex<[String]>([])
        for index in 0..<300 {
            var child = CommandEnvelope(commandName: index.isMultiple(of: 2) ? "even" : "odd", parent: root)
            child.metadata["index"] = String(index)
            var submission = BusSubmission(child: child, payload: Data(#"{"index":\#(index)}"#.utf8))
            submission.failIfUnhandled = false
            poster.submit(submission) { error in outcomes.withLock { $0.append(error?.message ?? "ok") } }
        }
        #expect(await waitUntil(.seconds(30)) { outcomes.withLock { $0.count } == 300 })
        #expect(outcomes.withLock { $0 } == Array(repeating: "ok", count: 300))
        let rows = try connection.execute("SELECT count(*) AS n, count(DISTINCT parent_id) AS parents FROM cmdbus.commands WHERE correlation_id = $1", [.uuid(root.id)])
        #expect(rows[row: 0].integer("n") == 300 && rows[row: 0].integer("parents") == 1)
        var names: [String] = []
        while case let more = try listener.notifications(waitingUpTo: .milliseconds(500)), !more.isEmpty { names += more.map(\.payload) }
        // One wake-up a name a transaction: at least one each, far fewer than 300.
        #expect(Set(names) == ["even", "odd"] && names.count <= 2 * (300 / SubcommandPoster.batchLimit + 2), "\(names.count) wake-ups")

        let unreachable = SubcommandPoster(
            url: "postgresql:///postgres?host=/nonexistent-cmdbus-socket-dir&user=postgres&connect_timeout=2", retryingFor: .zero
        )
        defer { unreachable.stop() }
        let failure = Mutex<String?>(nil)
        unreachable.submit(BusSubmission(child: CommandEnvelope(commandName: "lost", parent: root), payload: Data("{}".utf8))) { error in
            failure.withLock { $0 = error?.message ?? "ok" }
        }
        #expect(await waitUntil(.seconds(30)) { failure.withLock { $0 } != nil })
        #expect(failure.withLock { $0 }?.contains("nonexistent-cmdbus-socket-dir") == true, "\(failure.withLock { $0 } ?? "")")
    }

    /// A subcommand that a host cannot put on the bus while PostgreSQL restarts waits for it (for
    /// up to 30 s) instead of failing its tree, which would end in the dead letters: a handler
    /// error is not retried (32 of 3,000 `greet-all`s did so in a restart of two seconds).
    @Test(.timeLimit(.minutes(3)))
    func aSubcommandSentWhileTheDatabaseRestartsWaitsForIt() async throws {
        await BusHostProcess.stopAll()  // what an earlier test left running
        let database = try await SharedBusDatabase()
        let greeter = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"], lease: "30")
        let sender = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], lease: "30")
        defer { Task { await greeter.stop(); await sender.stop(); await database.drop() } }
        let count = 20
        let input = sender.work.file("later.ndjson")
        try (0..<count).map { #"{"command": "fixture.greet-later", "payload": {"milliseconds": 3000, "name": "n\#($0)"}}"# }
            .joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        let posted = try await Self.bus(database.url, "batch", input.path, "--no-wait")
        #expect(posted.status == 0, "\(posted.stderr)")
        // Every one has started, and sends its `greet` 3 s after it did: while the database is down.
        #expect(await waitUntil(.seconds(30)) {
            await Self.psqlNow(database.url, "SELECT count(*) FROM cmdbus.commands WHERE name = 'fixture.greet-later' AND state = 'running'") == "\(count)\n"
        })
        try await Self.restartPostgres(down: .seconds(5))
        #expect(await waitUntil(.seconds(90)) {
            await Self.psqlNow(database.url, "SELECT count(*) FROM cmdbus.commands WHERE finalized_at IS NOT NULL") == "\(2 * count)\n"
        })
        let outcomes = try await database.sql("SELECT name, state, attempt, count(*) FROM cmdbus.commands GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
        #expect(outcomes == "fixture.greet-later|succeeded|1|\(count)\ngreet|succeeded|1|\(count)\n", "\(outcomes)\n\(sender.output.suffix(2000))")
        // The host's threads of its own are named, for `top -H` and `perf`.
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(sender.pid)/task")) ?? []
        let names = Set(tasks.compactMap { try? String(contentsOfFile: "/proc/\(sender.pid)/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .newlines) })
        #expect(names.isSuperset(of: ["bus-claim", "bus-finish", "bus-heartbeat", "bus-results", "bus-subcommands"]), "\(names.sorted())")
    }

    /// A host told to stop waits `--drain` for what it runs, then hands back what is still
    /// running and leaves, however long that would have run: the drain's waiter was woken only
    /// after the wait it was part of, which could not end without it, so a host whose command
    /// outlived the drain stayed until the command ended (for good, for a parent whose subcommand
    /// no live host ran). The shortest drain too: its wait could end before the drain's waiter
    /// parked, which then waited for ever (and `--drain 0.0001` was no wait at all).
    @Test(.timeLimit(.minutes(3)), arguments: ["1", "0.0001"])
    func aCommandThatOutlivesTheDrainIsHandedBackAtItsEnd(drain: String) async throws {
        await BusHostProcess.stopAll()  // what an earlier test left running
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], lease: "60", drain: drain)
        defer { Task { await database.drop() } }
        let posted = try await Self.bus(database.url, "run", "fixture.sleep", "-p", "milliseconds=120000", "--no-wait")
        let id = posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(await waitUntil(.seconds(30)) {
            await Self.psqlNow(database.url, "SELECT state FROM cmdbus.commands WHERE id = '\(id)'") == "running\n"
        })
        let stopped = ContinuousClock.now
        host.signal(SIGTERM)
        #expect(await waitUntil(.seconds(60)) { !host.process.isRunning })
        #expect(ContinuousClock.now - stopped < .seconds(30), "the host left only after \(ContinuousClock.now - stopped)")
        #expect(host.output.contains("left the bus; handed back 1 unfinished command"), "\(host.output)")
        #expect(try await database.sql("SELECT state FROM cmdbus.commands WHERE id = '\(id)'") == "pending\n")
        await host.stop()
    }
}
