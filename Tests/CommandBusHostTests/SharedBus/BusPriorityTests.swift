import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// `--priority N` on `run`, a batch line's `"priority"` and `bus periodic --priority`: a host
    /// that runs one command at a time takes the highest first from a queue that waited;
    /// `--max-attempts N` bounds how often a retryable failure runs again. Without the shared
    /// bus, where nothing is queued or retried, each is refused, not ignored.
    @Test(.timeLimit(.minutes(3)))
    func higherPrioritiesAreClaimedFirst() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], extra: ["--capacity", "1"])
        defer { Task { await host.stop(); await database.drop() } }
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }

        // A queue built while the name is paused, in this order: four plain, one at 5, one line at 9, one at -3.
        #expect(try await Self.bus(database.url, "bus", "pause", "fixture.sleep").status == 0)
        let lines = scratch.file("sleep.ndjson")
        let sleep = #""command": "fixture.sleep", "payload": {"milliseconds": 50}"#
        try Data((Array(repeating: "{\(sleep)}", count: 4) + ["{\(sleep), \"priority\": 9}"]).joined(separator: "\n").utf8).write(to: lines)
        #expect(try await Self.bus(database.url, "batch", "--no-wait", lines.path).status == 0)
        #expect(try await Self.bus(database.url, "run", "fixture.sleep", #"{"milliseconds": 50}"#, "--priority", "5", "--no-wait").status == 0)
        #expect(try await Self.bus(database.url, "batch", "--no-wait", "--priority", "-3", lines.path).status == 0)
        #expect(try await Self.bus(database.url, "bus", "resume", "fixture.sleep").status == 0)
        #expect(await waitUntil(.seconds(60)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'succeeded'"))?.hasPrefix("11") ?? false
        })
        let order = try await database.sql("SELECT priority FROM cmdbus.commands ORDER BY started_at")
            .split(separator: "\n").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        // The second batch's own line at 9 keeps its 9 over --priority -3.
        #expect(order == [9, 9, 5, 0, 0, 0, 0, -3, -3, -3, -3], "\(order)")

        let periodic = try await Self.bus(database.url, "bus", "periodic", "fixture.whoami", "--every", "1s", "--priority", "7", "--max-attempts", "1")
        #expect(periodic.stdout.contains("every 1s"), "\(periodic.stdout)\(periodic.stderr)")
        #expect(try await Self.bus(database.url, "bus", "periodic").stdout.contains("every 1s, priority 7, at most 1 attempts, "))
        #expect(await waitUntil(.seconds(20)) {
            (try? await database.sql("SELECT DISTINCT priority || ' ' || max_attempts FROM cmdbus.commands WHERE name = 'fixture.whoami'")) == "7 1\n"
        })
        #expect(try await Self.bus(database.url, "bus", "periodic", "--remove", "fixture.whoami").status == 0)

        // A retryable failure runs again up to its attempts: 2 where asked, 5 by default.
        let twice = try await Self.bus(database.url, "run", "fixture.fail", "-p", "message=flaky", "-p", "retryable=true", "--max-attempts", "2")
        #expect(twice.status == 1, "\(twice.stderr)")
        let lineFile = scratch.file("fail.ndjson")
        try Data(#"{"command": "fixture.fail", "payload": {"message": "flaky", "retryable": true}, "maxAttempts": 3}"#.utf8).write(to: lineFile)
        #expect(try await Self.bus(database.url, "batch", lineFile.path).status == 1)
        #expect(try await Self.bus(database.url, "run", "fixture.fail", "-p", "message=flaky", "-p", "retryable=true").status == 1)
        let attempts = try await database.sql("SELECT attempt || '/' || max_attempts FROM cmdbus.commands WHERE name = 'fixture.fail' ORDER BY seq")
        #expect(attempts == "2/2\n3/3\n5/5\n", "\(attempts)")
        // `journal show --bus` says what the bus kept of it: priority, attempts, the host of each try.
        let id = try await Self.bus(database.url, "run", "fixture.fail", "-p", "message=flaky", "-p", "retryable=true", "--max-attempts", "2", "--priority", "3", "--no-wait")
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(await waitUntil(.seconds(30)) { (try? await database.sql("SELECT state FROM cmdbus.commands WHERE id = '\(id)'")) == "failed\n" })
        let shown = try JSONSerialization.jsonObject(with: Data(try await Self.bus(database.url, "journal", "show", id).stdout.utf8)) as? [String: Any]
        let details = try #require(shown?["bus"] as? [String: Any], "\(String(describing: shown))")
        #expect(details["priority"] as? Int == 3 && details["maxAttempts"] as? Int == 2 && details["runningOn"] is NSNull, "\(details)")
        let hosts = try #require(details["attemptedBy"] as? [String])
        #expect(hosts.count == 2 && hosts.allSatisfy { $0.hasSuffix(":\(host.pid)") }, "\(hosts)")

        for (arguments, message) in [
            (["run", "greet", "--priority", "5"], "--priority orders the shared bus's queue (--bus or $CMDBUS_BUS); a server or this process starts each command as it comes, so leave it out"),
            (["run", "greet", "--priority", "5", "--connect"], "--priority orders the shared bus's queue (--bus or $CMDBUS_BUS); a server or this process starts each command as it comes, so leave it out"),
            (["run", "greet", "--priority", "1001", "--bus", database.url], "--priority takes a whole number from -1000 to 1000 (higher is claimed first; 0 by default), got '1001'"),
            (["run", "greet", "--priority", "high", "--bus", database.url], "--priority takes a whole number from -1000 to 1000 (higher is claimed first; 0 by default), got 'high'"),
            (["run", "greet", "--max-attempts", "0", "--bus", database.url], "--max-attempts takes a whole number from 1 to 100 (how many times the bus runs it at most; 5 by default), got '0'"),
            (["batch", "--max-attempts", "3"], "--max-attempts is for the shared bus (--bus or $CMDBUS_BUS), which runs a command again after a retryable failure or a lost host; a server or this process runs each once, so leave it out"),
        ] {
            let refused = try await cmdbus(arguments)
            #expect(refused.status == 64 && refused.stderr == "cmdbus: error: \(message)\n", "\(arguments): \(refused.stderr)")
        }
        // A line's priority where nothing queues, or out of range: that line fails, saying why.
        let local = scratch.file("local.ndjson")
        try Data(#"{"command": "greet", "payload": {}, "priority": 2}"#.utf8).write(to: local)
        let batch = try await cmdbus(["batch", local.path, "--no-journal", "--plugins", scratch.path])
        #expect(batch.status == 1 && batch.stdout.contains(#"line 1: \"priority\" orders the shared bus's queue"#), "\(batch.stdout)")
        try Data(#"{"command": "greet", "payload": {}, "priority": 5000}"#.utf8).write(to: local)
        let range = try await Self.bus(database.url, "batch", "--no-wait", local.path)
        #expect(range.status == 1 && range.stdout.contains(#"line 1: \"priority\" is 5000; give a whole number from -1000 to 1000"#), "\(range.stdout)")
        try Data(#"{"command": "greet", "payload": {}, "maxAttempts": 2}"#.utf8).write(to: local)
        let attemptsLocally = try await cmdbus(["batch", local.path, "--no-journal", "--plugins", scratch.path])
        #expect(attemptsLocally.status == 1 && attemptsLocally.stdout.contains(#"line 1: \"maxAttempts\" is for the shared bus"#), "\(attemptsLocally.stdout)")
    }
}
