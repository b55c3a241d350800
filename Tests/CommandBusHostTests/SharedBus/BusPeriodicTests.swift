import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// The commands a periodic entry posted: its slots (milliseconds since 1970, from the
    /// idempotency key) in order, with their states.
    private static func posted(_ name: String, in database: SharedBusDatabase) async throws -> [(slot: Int64, state: String)] {
        try await database.sql("""
            SELECT split_part(idempotency_key, ':', 3) || ' ' || state FROM cmdbus.commands
            WHERE metadata->>'cmdbus.periodic' = '\(name)' ORDER BY 1
            """).split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 2, let slot = Int64(parts[0]) else { return nil }
            return (slot, String(parts[1]))
        }
    }

    /// `bus periodic NAME --every 1s` on two hosts: each slot is posted once, by one host or the
    /// other, a second apart; with both hosts killed, the slots of the outage are skipped, and
    /// the host that comes back posts one command for the latest; removed, nothing more.
    @Test(.timeLimit(.minutes(4)))
    func aPeriodicCommandIsPostedOncePerSlotByWhicheverHostIsLive() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let first = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], extra: ["--http", "127.0.0.1:0"])
        let second = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"])
        defer { Task { await first.stop(); await second.stop(); await database.drop() } }

        let set = try await Self.bus(database.url, "bus", "periodic", "fixture.whoami", "--every", "1s", "--as", "tick")
        #expect(set.status == 0 && set.stdout.hasPrefix("set periodic 'fixture.whoami' as 'tick': every 1s; the first is due in 1"), "\(set.stdout)\(set.stderr)")
        #expect(set.stderr.isEmpty, "\(set.stderr)")
        #expect(await waitUntil(.seconds(30)) { ((try? await Self.posted("tick", in: database)) ?? []).filter { $0.state == "succeeded" }.count >= 6 })
        var slots = try await Self.posted("tick", in: database).map(\.slot)
        #expect(Set(slots).count == slots.count, "each slot once: \(slots)")
        // A second apart; under a loaded machine a slot may be skipped, never posted off the grid.
        #expect(zip(slots, slots.dropFirst()).allSatisfy { ($1 - $0) % 1000 == 0 }, "on the second's grid: \(slots)")
        #expect(zip(slots, slots.dropFirst()).filter { $1 - $0 == 1000 }.count >= 3, "most a second apart: \(slots)")
        let posters = try await database.sql("SELECT count(DISTINCT attempted_by[1]) FROM cmdbus.commands WHERE metadata ? 'cmdbus.periodic'")
        #expect(Int(posters.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 >= 1)
        let status = try await Self.bus(database.url, "bus", "status")
        #expect(status.stdout.contains("  periodic: tick: posts fixture.whoami every 1s, "), "\(status.stdout)")
        let url = try #require(dashboardURL(in: first.output))
        let metrics = try await runProcess("/usr/bin/env", ["python3", "-c", "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())", url + "/metrics"]).stdout
        #expect(metrics.contains(#"cmdbus_bus_periodic_posted_total{periodic="tick"} "#), "\(metrics)")
        #expect(metrics.contains(#"cmdbus_bus_periodic_next_due_seconds{periodic="tick"} "#), "\(metrics)")

        // Both hosts die; three slots or more pass with no host to post them.
        await first.kill9()
        await second.kill9()
        let before = try await Self.posted("tick", in: database).count
        try await Task.sleep(for: .seconds(4))
        #expect(try await Self.posted("tick", in: database).count == before, "no host, no post")
        let third = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"])
        defer { Task { await third.stop() } }
        #expect(await waitUntil(.seconds(20)) { ((try? await Self.posted("tick", in: database)) ?? []).count >= before + 2 })
        slots = try await Self.posted("tick", in: database).map(\.slot)
        let gaps = zip(slots, slots.dropFirst()).map { $1 - $0 }
        #expect(Set(slots).count == slots.count, "each slot once: \(slots)")
        #expect(gaps.contains { $0 >= 4000 } && gaps.allSatisfy { $0 % 1000 == 0 }, "a jump over the outage, on the second's grid: \(gaps)")
        #expect(third.output.contains("periodic 'tick' posted 'fixture.whoami' for its latest slot and skipped "), "\(third.output)")
        let listed = try JSONSerialization.jsonObject(with: Data(try await Self.bus(database.url, "bus", "periodic", "--json").stdout.utf8)) as? [[String: Any]]
        let entry = try #require(listed?.first)
        #expect((entry["skipped"] as? Int ?? 0) >= 3 && entry["every"] as? String == "1s" && entry["lastState"] != nil, "\(entry)")

        let removed = try await Self.bus(database.url, "bus", "periodic", "--remove", "tick", "nothing")
        #expect(removed.stdout == "removed periodic 'tick': the hosts post it no more (what it posted already runs)\nthere is no periodic 'nothing' ('cmdbus bus periodic' lists them)\n", "\(removed.stdout)")
        let afterRemoval = try await Self.posted("tick", in: database).count
        try await Task.sleep(for: .seconds(2.5))
        #expect(try await Self.posted("tick", in: database).count == afterRemoval)
        #expect(try await Self.bus(database.url, "bus", "periodic").stdout.hasPrefix("no periodic command on the bus"))
    }

    /// A cron entry posts at the whole minute it names, and moves on to the next; `--no-overlap`
    /// skips a slot while the last run goes on; setting an entry again with the same schedule
    /// keeps its next slot; each mistake is refused in a line that says what to write.
    @Test(.timeLimit(.minutes(4)))
    func cronEntriesNoOverlapAndMistakes() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"])
        defer { Task { await host.stop(); await database.drop() } }

        // Every minute; its first slot brought forward by hand to now, so the test need not wait for one.
        let cron = try await Self.bus(database.url, "bus", "periodic", "fixture.whoami", "--cron", "* * * * *", "-p", "who=cron")
        #expect(cron.status == 0 && cron.stdout.contains("cron '* * * * *' (UTC); the first is due in "), "\(cron.stdout)\(cron.stderr)")
        try await database.sql("UPDATE cmdbus.periodic SET next_at = date_trunc('minute', now())")
        try await database.sql("SELECT pg_notify('cmdbus_periodic', '')")
        #expect(await waitUntil(.seconds(15)) { ((try? await Self.posted("fixture.whoami", in: database)) ?? []).count == 1 })
        let minute = try await database.sql("""
            SELECT (EXTRACT(EPOCH FROM date_trunc('minute', created_at)) * 1000)::int8 || ' ' FROM cmdbus.commands
            """)
        let slot = try await Self.posted("fixture.whoami", in: database)[0].slot
        #expect(minute.hasPrefix("\(slot) "), "the slot is the whole minute: \(minute) vs \(slot)")
        let payload = try await database.sql("SELECT convert_from(payload, 'UTF8') FROM cmdbus.commands")
        #expect(payload.contains(#""who":"cron""#), "\(payload)")
        let next = try await database.sql("SELECT EXTRACT(EPOCH FROM next_at)::int8 % 60 || ' ' || (next_at > now()) FROM cmdbus.periodic")
        #expect(next.hasPrefix("0 t"), "on to the next whole minute: \(next)")
        let again = try await Self.bus(database.url, "bus", "periodic", "fixture.whoami", "--cron", "* * * * *", "-p", "who=cron")
        #expect(again.stdout.hasPrefix("replaced periodic 'fixture.whoami': ") && again.stdout.hasSuffix("(the schedule is as it was, so its next slot stands)\n"), "\(again.stdout)")
        #expect(try await database.sql("SELECT EXTRACT(EPOCH FROM next_at)::int8 % 60 FROM cmdbus.periodic").hasPrefix("0"))

        // A run of 3 s every second, without overlap: never two at once, and the slots between skipped.
        let slow = try await Self.bus(
            database.url, "bus", "periodic", "fixture.sleep", #"{"milliseconds": 3000}"#, "--every", "1s", "--no-overlap"
        )
        #expect(slow.stdout.contains("every 1s, no overlap;"), "\(slow.stdout)")
        var most = 0
        let deadline = ContinuousClock.now + .seconds(9)
        while ContinuousClock.now < deadline {
            let unfinished = try await database.sql("""
                SELECT count(*) FROM cmdbus.commands WHERE name = 'fixture.sleep' AND state IN ('pending', 'running')
                """)
            most = max(most, Int(unfinished.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0)
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(most == 1)
        let skipped = try await database.sql("SELECT skipped FROM cmdbus.periodic WHERE name = 'fixture.sleep'")
        #expect((Int(skipped.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) >= 4, "\(skipped)")
        #expect(host.output.contains("periodic 'fixture.sleep' skipped a slot: the 'fixture.sleep' it posted before is still pending or running (no overlap)"))

        for (arguments, message) in [
            (["fixture.whoami"], "'cmdbus bus periodic fixture.whoami' needs a schedule: --every 1h (30s, 5m, 1d), or --cron '0 3 * * *' (minute hour day month weekday, UTC)"),
            (["fixture.whoami", "--every", "1h", "--cron", "@daily"], "--every and --cron are two schedules; give one: --every 1h, or --cron '0 3 * * *'"),
            (["fixture.whoami", "--every", "500ms"], "--every takes a duration of at least 1s (30s, 5m, 1h, 1d), got '500ms'"),
            (["fixture.whoami", "--every", "soon"], "--every takes a duration such as 30, 30s, 500ms, 5m, 2h or 30d, at most "),
            (["fixture.whoami", "--cron", "0 25 * * *"], "cron '0 25 * * *': the hour field '25' has '25', not a number from 0 to 23"),
            (["fixture.whoami", "{", "--every", "1h"], "payload for 'fixture.whoami' is not valid JSON: "),
            (["fixture.whoami", "{}", "{}", "--every", "1h"], "'cmdbus bus periodic' takes a command and at most one JSON payload; got 2 payloads (quote the payload whole)"),
            (["--every", "1h"], "'cmdbus bus periodic --every' needs the command to post: 'cmdbus bus periodic report --every 1h'"),
            (["--remove"], "'cmdbus bus periodic --remove' needs the names of the periodic commands; 'cmdbus bus periodic' lists them"),
            (["--remove", "x", "--every", "1h"], "--remove takes names only, not --every; set the entry again to change it"),
            (["", "--every", "1h"], "'' is not a command name: it is empty"),
            (["fixture.whoami", "--as", "nightly\u{7}", "--every", "1h"], "--as 'nightly\\u{7}' holds a control character (U+7); name the entry in printable characters"),
            (["fixture.whoami", "--every", "1h", "--timezone", "UTC"], "--timezone is for --cron: an --every interval runs from now, whatever the zone"),
            (["fixture.whoami", "--cron", "@daily", "--timezone", "Mars/Olympus"], "cron 'CRON_TZ=Mars/Olympus @daily' names the time zone 'Mars/Olympus', which is not one; "),
            (["fixture.whoami", "--cron", "TZ=UTC @daily", "--timezone", "UTC"], "--timezone and the cron expression's own CRON_TZ= name two time zones; give one"),
        ] {
            let result = try await cmdbus(["bus", "periodic"] + arguments + ["--bus", database.url])
            // 65 for a malformed payload, as `run` says it; 64 for the rest.
            #expect(result.status == (message.hasPrefix("payload") ? 65 : 64) && result.stderr.hasPrefix("cmdbus: error: \(message)"), "\(arguments): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "one line: \(result.stderr)")
        }
        let zoned = try await Self.bus(database.url, "bus", "periodic", "fixture.whoami", "--as", "paris", "--cron", "0 9 * * MON-FRI", "--timezone", "Europe/Paris")
        #expect(zoned.stdout.hasPrefix("set periodic 'fixture.whoami' as 'paris': cron '0 9 * * MON-FRI' (Europe/Paris); the first is due in "), "\(zoned.stdout)")
        let hour = try await database.sql("SELECT EXTRACT(HOUR FROM next_at AT TIME ZONE 'Europe/Paris') FROM cmdbus.periodic WHERE name = 'paris'")
        #expect(hour.hasPrefix("9"), "nine in Paris: \(hour)")
        #expect(try await Self.bus(database.url, "bus", "periodic").stdout.contains("paris: posts fixture.whoami cron '0 9 * * MON-FRI' (Europe/Paris), next in "))
        // --dry-run prints the next five slots and sets nothing; it needs no bus.
        let year = Calendar(identifier: .gregorian).component(.year, from: Date())
        let dry = try await cmdbus(["bus", "periodic", "fixture.whoami", "--as", "yearly", "--cron", "@yearly", "--dry-run"], environment: ["CMDBUS_BUS": ""])
        #expect(dry.status == 0 && dry.stdout == "periodic 'yearly' would post 'fixture.whoami' cron '@yearly' (UTC); the next 5 (nothing was set):\n"
            + (1...5).map { "  \(year + $0)-01-01T00:00:00Z\n" }.joined(), "\(dry.stdout)\(dry.stderr)")
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.periodic WHERE name = 'yearly'") == "0\n")
        // A name no host handles is set all the same, with a warning.
        let unhandled = try await Self.bus(database.url, "bus", "periodic", "report", "--every", "1h")
        #expect(unhandled.status == 0 && unhandled.stderr.contains("no live host on the bus handles 'report'"), "\(unhandled.stderr)")
    }
}
