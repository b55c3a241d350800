import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// A host claimed up to its capacity (64) of a command whose handler runs one at a time, so
    /// one host took ten commands of 300 ms and ran them in turn for 3 s while another host that
    /// had the plugin did nothing, holding them `running` under its lease. It claims no more of a
    /// name than its handlers run at once (`max_concurrency`): the two hosts share the work.
    @Test(.timeLimit(.minutes(3)))
    func aHostClaimsNoMoreOfANameThanItsHandlersRunAtOnce() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let serial = [(source: "one_at_a_time", defines: [String]())]
        let first = try await BusHostProcess(bus: database.url, plugins: [], fixtures: serial)
        let second = try await BusHostProcess(bus: database.url, plugins: [], fixtures: serial)
        defer { Task { await first.stop(); await second.stop(); await database.drop() } }
        let listing = try await Self.bus(database.url, "plugins")
        #expect(listing.stdout.contains("serial.work → serial (") && listing.stdout.contains("; one at a time"), "\(listing.stdout)")

        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let lines = scratch.file("work.ndjson")
        try Data(String(repeating: #"{"command": "serial.work", "payload": {}}"# + "\n", count: 10).utf8).write(to: lines)
        let posted = try await Self.bus(database.url, "batch", "--no-wait", lines.path)
        #expect(posted.status == 0, "\(posted.stderr)")
        // While they run, no host holds more than one, but for a moment or two: a host claims the
        // next as one ends here, while its finisher still writes that end to the bus (a CI run
        // under load saw two). It held all ten before.
        var most = 0, finished = false
        let deadline = ContinuousClock.now + .seconds(30)
        while !finished, ContinuousClock.now < deadline {
            let held = try await database.sql("""
                SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM cmdbus.commands WHERE state = 'running' GROUP BY lease_owner) h
                """)
            most = max(most, Int(held.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0)
            finished = try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'succeeded'") == "10\n"
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(finished)
        #expect(most < 4, "a host held \(most) commands of a handler that runs one at a time")
        #expect(try await Self.bus(database.url, "bus", "status").stdout.hasSuffix("  nothing running, pending or scheduled\n"))
        // Compared as numbers: sorted as text, a pid past a wrap (328) came after 32733.
        let pids = try await database.sql("SELECT DISTINCT convert_from(result, 'UTF8')::jsonb ->> 'pid' FROM cmdbus.commands")
        #expect(Set(pids.split(separator: "\n").compactMap { Int32($0) }) == [first.pid, second.pid], "both hosts ran some: \(pids)")
        let overlapped = try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE (convert_from(result, 'UTF8')::jsonb ->> 'overlapped')::bool")
        #expect(overlapped == "0\n")
    }

    /// A `can` waited behind every command pending for its name (it was claimed in turn, as
    /// they were): with one host of capacity 2 and eight commands of 3 s waiting, `can` took
    /// more than ten seconds to say yes. A probe is claimed first, and by a host with no room left:
    /// it ends before any of the commands that waited when it came has started. (The commands run
    /// 30 s, so a slow machine cannot let one start first; this test asked for an answer within
    /// 5 s of 3 s commands, and a CI run under load saw the first of them end in between.)
    @Test(.timeLimit(.minutes(3)))
    func aProbeIsAnsweredAheadOfTheCommandsThatWait() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], extra: ["--capacity", "2"])
        defer { Task { await host.stop(); await database.drop() } }
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let lines = scratch.file("sleep.ndjson")
        try Data(String(repeating: #"{"command": "fixture.sleep", "payload": {"milliseconds": 30000}}"# + "\n", count: 10).utf8).write(to: lines)
        #expect(try await Self.bus(database.url, "batch", "--no-wait", lines.path).status == 0)
        #expect(await waitUntil(.seconds(10)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'running'")) == "2\n"
        })

        let can = try await Self.bus(database.url, "can", "fixture.sleep", #"{"milliseconds": 1}"#)
        #expect(can.status == 0, "\(can.stderr)")
        let startedBeforeTheProbeEnded = try await database.sql("""
            SELECT count(*) FROM cmdbus.commands
            WHERE kind = 'command' AND started_at < (SELECT finalized_at FROM cmdbus.commands WHERE kind = 'probe')
            """)
        #expect(startedBeforeTheProbeEnded == "2\n", "commands that waited started before the probe was answered")
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'pending' AND kind = 'command'") == "8\n")
        #expect(try await Self.bus(database.url, "bus", "cancel", "fixture.sleep", "--running").status == 0)
    }
}
