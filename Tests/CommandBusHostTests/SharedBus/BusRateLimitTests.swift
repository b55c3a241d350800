import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// `bus limit NAME --rate 3/700ms`: on two hosts together (one that would run eight at once,
    /// more than the rate lets start in a period, and one that runs one at a time), no more
    /// than three commands of the name start in any 0.7 s
    /// (a sliding window, counted from the bus's own clock), and the next starts as the window
    /// has room (the hosts wake for it; their poll is every second). The
    /// rate and a limit at once are set and removed each on its own; the status, the listing and
    /// the metrics show the rate with how many started in its last period.
    @Test(.timeLimit(.minutes(4)))
    func aRateAcrossTheBusHoldsOnEveryHostTogether() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let watched = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], extra: ["--capacity", "8", "--http", "127.0.0.1:0"])
        let second = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], extra: ["--capacity", "1"])
        defer { Task { await watched.stop(); await second.stop(); await database.drop() } }
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }

        let set = try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "--rate", "3/700ms")
        #expect(set.status == 0 && set.stdout == "limited 'fixture.sleep' to 3 starts in any 0.7 s across the bus (0 pending, 0 running)\n",
                "\(set.stdout)\(set.stderr)")
        let lines = scratch.file("sleep.ndjson")
        try Data(String(repeating: #"{"command": "fixture.sleep", "payload": {"milliseconds": 10}}"# + "\n", count: 12).utf8).write(to: lines)
        #expect(try await Self.bus(database.url, "batch", "--no-wait", lines.path).status == 0)
        #expect(await waitUntil(.seconds(60)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'succeeded'")) == "12\n"
        })
        let starts = try await database.sql("SELECT EXTRACT(EPOCH FROM started_at)::float8 FROM cmdbus.commands ORDER BY started_at")
            .split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        try #require(starts.count == 12)
        // The fourth start after any start comes 0.7 s after it, or later: never four in a window.
        let windows = (0..<9).map { starts[$0 + 3] - starts[$0] }
        #expect(windows.allSatisfy { $0 >= 0.699 }, "\(windows)")
        // Each window's next three start as it has room, not at a host's next poll a second on.
        let gaps = stride(from: 0, to: 9, by: 3).map { starts[$0 + 3] - starts[$0] }
        #expect(gaps.sorted()[1] < 0.95, "\(gaps)")

        // Shown: in the listing, the status, and the metrics (with how many started of late).
        let listed = try await Self.bus(database.url, "bus", "limit")
        #expect(listed.stdout.hasPrefix("fixture.sleep: 3 starts in any 0.7 s ("), "\(listed.stdout)")
        #expect(listed.stdout.contains(" in the last 0.7 s) across the bus, set "), "\(listed.stdout)")
        let json = try JSONSerialization.jsonObject(with: Data(try await Self.bus(database.url, "bus", "limit", "--json").stdout.utf8)) as? [[String: Any]]
        let rate = try #require(json?.first?["rate"] as? [String: Any], "\(String(describing: json))")
        #expect(rate["starts"] as? Int == 3 && rate["periodSeconds"] as? Double == 0.7 && json?.first?["limit"] is NSNull)
        try await database.sql("DELETE FROM cmdbus.commands")
        #expect(try await Self.bus(database.url, "bus", "pause", "fixture.sleep").status == 0)
        #expect(try await Self.bus(database.url, "batch", "--no-wait", lines.path).status == 0)
        let status = try await Self.bus(database.url, "bus", "status")
        #expect(status.stdout.contains("  fixture.sleep (paused) (at most 3 starts in any 0.7 s): "), "\(status.stdout)")
        let url = try #require(dashboardURL(in: watched.output))
        let metrics = try await runProcess("/usr/bin/env", ["python3", "-c", "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())", url + "/metrics"]).stdout
        #expect(metrics.contains(#"cmdbus_bus_rate_limit_starts{command="fixture.sleep"} 3"#), "\(metrics)")
        #expect(metrics.contains(#"cmdbus_bus_rate_limit_period_seconds{command="fixture.sleep"} 0.7"#), "\(metrics)")
        let recent = metrics.split(separator: "\n").first { $0.hasPrefix(#"cmdbus_bus_rate_recent_starts{command="fixture.sleep"} "#) }
        #expect(recent.flatMap { Int($0.split(separator: " ").last ?? "") }.map((0...3).contains) == true, "\(metrics)")
        #expect(!metrics.contains(#"cmdbus_bus_limit{command="fixture.sleep"}"#), "no limit at once")
        try await database.sql("DELETE FROM cmdbus.commands")
        #expect(try await Self.bus(database.url, "bus", "resume", "fixture.sleep").status == 0)

        // Each set and removed on its own.
        let both = try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "2")
        #expect(both.stdout.hasPrefix("limited 'fixture.sleep' to 2 at once across the bus ("), "\(both.stdout)")
        #expect(try await Self.bus(database.url, "bus", "limit").stdout.hasPrefix("fixture.sleep: at most 2 at once and 3 starts in any 0.7 s ("))
        let faster = try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "--rate", "100/s")
        #expect(faster.stdout.hasPrefix("limited 'fixture.sleep' to 100 starts a second across the bus, where it was 3 starts in any 0.7 s ("),
                "\(faster.stdout)")
        #expect(try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "none").status == 0)
        let rateOnly = try await Self.bus(database.url, "bus", "limit").stdout
        #expect(rateOnly.hasPrefix("fixture.sleep: 100 starts a second (") && rateOnly.contains(" in the last 1 s) across"), "\(rateOnly)")
        let removed = try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "--rate", "none")
        #expect(removed.stdout.hasPrefix("'fixture.sleep' has no rate across the bus now, where it was 100 starts a second ("), "\(removed.stdout)")
        #expect(try await Self.bus(database.url, "bus", "limit").stdout.hasPrefix("no command name is limited across the bus"))

        // The dashboard: the queue's Limits editor, and its API.
        let token = try #require(try await DashboardTests.http("GET", url + "/").body.split(separator: "\"").first { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }.map(String.init))
        let api = url + "/api/queues/fixture.sleep/limit"
        let fromAPI = try await DashboardTests.http("POST", api + "?atOnce=2&rate=5/s", headers: ["X-Cmdbus-Token": token])
        #expect(fromAPI.status == 200 && fromAPI.body.contains(#""limit":2"#), "\(fromAPI.body)")
        #expect(fromAPI.body.contains(#""rate":{"periodSeconds":1,"starts":5}"#), "\(fromAPI.body)")
        let wrong = try await DashboardTests.http("POST", api + "?rate=5/fortnight", headers: ["X-Cmdbus-Token": token])
        #expect(wrong.status == 400 && wrong.body.contains("rate takes how many may start in a period, such as 10/s"), "\(wrong.body)")
        let nothing = try await DashboardTests.http("POST", api, headers: ["X-Cmdbus-Token": token])
        #expect(nothing.status == 400 && nothing.body.contains("give atOnce=N (or none) or rate=N/PERIOD (or none)"), "\(nothing.body)")
        let edited = try await DashboardTests.browse(
            url + "/#/hosts",
            waitFor: "[...document.querySelectorAll('tr')].some(r => r.cells[0] && r.cells[0].textContent.startsWith('fixture.sleep') && r.querySelector('details.limits input[name=rate]').value === '5/s')",
            shot: "bus-limits-editor.png",
            evals: ["""
                (() => {
                  const editor = [...document.querySelectorAll('tr')].find(r => r.cells[0] && r.cells[0].textContent.startsWith('fixture.sleep')).querySelector('details.limits');
                  editor.open = true;
                  editor.querySelector('input[name=atOnce]').value = '';
                  editor.querySelector('input[name=rate]').value = '7/m';
                  editor.querySelector('form').requestSubmit();
                  return new Promise(done => setTimeout(() => done('saved'), 1500));
                })()
                """]
        )
        #expect(edited.waited && edited.exceptions.isEmpty, "\(edited.exceptions)")
        #expect(await waitUntil(.seconds(10)) {
            (try? await database.sql("SELECT max_running IS NULL AND rate_count = 7 AND rate_period_ms = 60000 FROM cmdbus.limits WHERE name = 'fixture.sleep'")) == "t\n"
        })
        #expect(try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "--rate", "none").status == 0)

        for (arguments, message) in [
            (["fixture.sleep", "--rate", "10"], "--rate takes how many may start in a period, such as 10/s, 100/m, 5/10s or 1000/h (1 to 10000 in up to a week), or 'none' to remove it; got '10'"),
            (["fixture.sleep", "--rate", "0/s"], "--rate takes how many may start in a period, such as 10/s, 100/m, 5/10s or 1000/h (1 to 10000 in up to a week), or 'none' to remove it; got '0/s'"),
            (["fixture.sleep", "--rate", "5/0s"], "--rate takes how many may start in a period, such as 10/s, 100/m, 5/10s or 1000/h (1 to 10000 in up to a week), or 'none' to remove it; got '5/0s'"),
            (["fixture.sleep", "--rate", "5/fortnight"], "--rate takes how many may start in a period, such as 10/s, 100/m, 5/10s or 1000/h (1 to 10000 in up to a week), or 'none' to remove it; got '5/fortnight'"),
            (["fixture.sleep", "--rate", "20000/s"], "--rate takes how many may start in a period, such as 10/s, 100/m, 5/10s or 1000/h (1 to 10000 in up to a week), or 'none' to remove it; got '20000/s'"),
            (["--rate", "1/s"], "'cmdbus bus limit --rate' needs the command names to limit: 'cmdbus bus limit report --rate 10/s'"),
        ] {
            let refused = try await cmdbus(["bus", "limit"] + arguments + ["--bus", database.url])
            #expect(refused.status == 64 && refused.stderr == "cmdbus: error: \(message)\n", "\(refused.stderr)")
        }
        // Hosts whose cmdbus predates rates (schema version 5) are warned of when a rate is set,
        // not when a limit at once is, which they know.
        try await database.sql("UPDATE cmdbus.hosts SET catalog = jsonb_set(catalog, '{busSchemaVersion}', '5')")
        let warned = try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "--rate", "1/s")
        #expect(warned.stderr.contains("runs a cmdbus from before rates (--rate) and claims 'fixture.sleep' without one; upgrade it"), "\(warned.stderr)")
        #expect(try await Self.bus(database.url, "bus", "limit", "fixture.sleep", "2").stderr.isEmpty)
        let elsewhere = try await cmdbus(["bus", "status", "--rate", "1/s", "--bus", database.url])
        #expect(elsewhere.status == 64 && elsewhere.stderr.contains("--rate is for 'cmdbus bus limit', not 'bus status'"), "\(elsewhere.stderr)")
    }

    /// A command every handler declines did not start: its claim's start under the name's rate
    /// is taken off again, so declines do not use up the rate (three declined under `5/1h` left
    /// room for two more in the hour, and nothing else of the name could start till it passed).
    @Test(.timeLimit(.minutes(2)))
    func aDeclinedCommandIsNoStartUnderARate() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"])
        defer { Task { await host.stop(); await database.drop() } }
        #expect(try await Self.bus(database.url, "bus", "limit", "greet", "--rate", "5/1h").status == 0)
        @Sendable func starts() async throws -> String {
            try await database.sql("SELECT cardinality(recent_starts) FROM cmdbus.limits WHERE name = 'greet'")
        }
        for _ in 0..<3 {
            let declined = try await Self.bus(database.url, "run", "greet", "-p", "name=")
            #expect(declined.status == 69 && declined.stderr.contains("declined"), "\(declined.stderr)")
        }
        #expect(try await starts() == "0\n")
        let ran = try await Self.bus(database.url, "run", "greet", "-p", "name=Ada")
        #expect(ran.status == 0 && ran.stdout.contains("Hello, Ada!"), "\(ran.stdout)\(ran.stderr)")
        #expect(try await starts() == "1\n")
    }
}
