import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// `bus limit NAME N`: at most N of a name run at once on every host together. Three hosts
    /// that each would run all of them claim at the same moment (one batch wakes them all),
    /// under the name's lock: never more than the limit run; raised, more run; removed, all.
    @Test(.timeLimit(.minutes(4)))
    func aLimitAcrossTheBusHoldsOnEveryHostTogether() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let watched = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], extra: ["--http", "127.0.0.1:0"])
        let second = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"])
        let third = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"])
        defer { Task { await watched.stop(); await second.stop(); await third.stop(); await database.drop() } }
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let lines = scratch.file("sleep.ndjson")
        try Data(String(repeating: #"{"command": "fixture.sleep", "payload": {"milliseconds": 300}}"# + "\n", count: 12).utf8).write(to: lines)
        /// Posts the twelve and returns the most that ran at once, once all have succeeded.
        func mostAtOnce() async throws -> Int {
            try await database.sql("DELETE FROM cmdbus.commands")
            #expect(try await Self.bus(database.url, "batch", "--no-wait", lines.path).status == 0)
            var most = 0, done = false
            let deadline = ContinuousClock.now + .seconds(60)
            while !done, ContinuousClock.now < deadline {
                let counts = try await database.sql("""
                    SELECT count(*) FILTER (WHERE state = 'running') || ' ' || count(*) FILTER (WHERE state = 'succeeded') FROM cmdbus.commands
                    """).split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                most = max(most, counts.first ?? 0)
                done = counts.last == 12
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(done)
            return most
        }

        let one = try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "1")
        #expect(one.status == 0 && one.stdout == "limited 'fixture.sleep' to 1 at once across the bus (0 pending, 0 running)\n", "\(one.stdout)\(one.stderr)")
        #expect(try await mostAtOnce() == 1, "one at a time, on three hosts")

        let three = try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "3")
        #expect(three.stdout.hasPrefix("limited 'fixture.sleep' to 3 at once across the bus, where it was 1 ("), "\(three.stdout)")
        // While they run: the limit in the status, the dashboard's data and the metrics.
        try await database.sql("DELETE FROM cmdbus.commands")
        #expect(try await Self.bus(database.url, "batch", "--no-wait", lines.path).status == 0)
        let status = try await Self.bus(database.url, "bus", "status")
        #expect(status.stdout.contains("  fixture.sleep (at most 3 at once): "), "\(status.stdout)")
        #expect(status.stdout.contains("  limit: fixture.sleep: at most 3 at once across the bus, set "), "\(status.stdout)")
        let url = try #require(dashboardURL(in: watched.output))
        let metrics = try await runProcess("/usr/bin/env", ["python3", "-c", "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())", url + "/metrics"]).stdout
        #expect(metrics.contains(#"cmdbus_bus_limit{command="fixture.sleep"} 3"#), "\(metrics)")
        #expect(try await mostAtOnce() == 3)
        let listed = try await Self.bus(database.url, "bus", "limit")
        #expect(listed.stdout.hasPrefix("fixture.sleep: at most 3 at once across the bus, set "), "\(listed.stdout)")

        let none = try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "none")
        #expect(none.stdout.hasPrefix("'fixture.sleep' has no limit at once across the bus now, where it was 3 ("), "\(none.stdout)")
        #expect(try await mostAtOnce() > 3, "twelve on three hosts that each run all of them")
        #expect(try await Self.bus(database.url, "bus", "limit").stdout.hasPrefix("no command name is limited across the bus"))

        // The next starts as one ends (its end wakes the hosts), not at a host's next poll: with
        // one host, the median from one's end to the next's start was 0.8 s; a few milliseconds now.
        await second.stop()
        await third.stop()
        #expect(try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "1").status == 0)
        #expect(try await mostAtOnce() == 1)
        let gap = try await database.sql("""
            WITH o AS (SELECT started_at, lag(finalized_at) OVER (ORDER BY started_at) AS previous FROM cmdbus.commands)
            SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM started_at - previous)) FROM o WHERE previous IS NOT NULL
            """)
        #expect((Double(gap.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 9) < 0.5, "median gap \(gap)")

        for (arguments, message) in [
            (["fixture.sleep", "0"], "'0' is not a limit: give a whole number of at least 1, or 'none' to remove the limit"),
            // Found by hand: taken as a command's name, and the message suggested 'bus limit 1e9 2'.
            (["fixture.sleep", "1e9"], "'1e9' is not a limit: give a whole number of at least 1, or 'none' to remove the limit"),
            (["2"], "'cmdbus bus limit' needs the command names before the limit: 'cmdbus bus limit report 2'"),
            (["fixture.sleep"], "'cmdbus bus limit' needs command names and a limit: 'cmdbus bus limit fixture.sleep 2' (at once), '--rate 10/s' (starts a second), or 'none' to remove one"),
            (["fixture.sleep", "1", "2"], "'1' looks like a limit, not a command name: give the names, then one limit ('cmdbus bus limit report 2')"),
        ] {
            let refused = try await cmdbus(["bus", "limit"] + arguments + ["--bus", database.url])
            #expect(refused.status == 64 && refused.stderr == "cmdbus: error: \(message)\n", "\(refused.stderr)")
        }
    }
}
