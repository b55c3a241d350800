import Foundation
import Testing

extension SharedBusTests {
    /// `cmdbus bus pause` stops every host claiming a command name: what is posted waits,
    /// pending, past several of the hosts' one-second polls, while `can` still gets its answer;
    /// `bus status`, `/metrics` and the dashboard say it is paused; `bus resume` (or the
    /// dashboard's button) lets the hosts take it at once. A host from before pauses (its
    /// catalog without version 3) is named in a warning, since it claims the name all the same.
    @Test(.timeLimit(.minutes(3)))
    func aPausedNameWaitsUntilItIsResumed() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"], extra: ["--http", "127.0.0.1:0"])
        defer { Task { await host.stop(); await database.drop() } }

        let pause = try await Self.bus(database.url, "bus", "pause", "greet")
        #expect(pause.status == 0 && pause.stdout == "paused 'greet': no host claims it until 'cmdbus bus resume greet'; 0 pending wait\n", "\(pause.stdout)\(pause.stderr)")
        #expect(pause.stderr.isEmpty, "this host knows pauses: \(pause.stderr)")
        let typo = try await Self.bus(database.url, "bus", "pause", "gret")
        #expect(typo.status == 0 && typo.stderr.contains("cmdbus: warning: no live host on the bus handles 'gret'; it is paused all the same"), "\(typo.stderr)")
        #expect(try await Self.bus(database.url, "bus", "resume", "gret").stdout == "resumed 'gret': hosts claim it again (0 pending)\n")
        let again = try await Self.bus(database.url, "bus", "pause", "greet")
        #expect(again.status == 0 && again.stdout == "'greet' was paused already (0 pending)\n")

        let posted = try await Self.bus(database.url, "run", "greet", "-p", "name=Ada", "--no-wait")
        #expect(posted.status == 0 && posted.stderr.contains("cmdbus: note: 'greet' is paused on the bus: what was posted waits, pending, until 'cmdbus bus resume greet'"), "\(posted.stderr)")
        let id = posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        async let waiting = Self.bus(database.url, "run", "greet", "-p", "name=Grace")
        // The host polls once a second, and a notification wakes it at once: three seconds is three chances to take it.
        try await Task.sleep(for: .seconds(3))
        #expect(try await database.sql("SELECT state FROM cmdbus.commands WHERE id = '\(id)'") == "pending\n")
        #expect(try await Self.bus(database.url, "can", "greet", "-p", "name=Ada").status == 0, "a probe only asks: it is answered while paused")

        let status = try await Self.bus(database.url, "bus", "status")
        #expect(status.stdout.contains("  greet (paused): 2 pending, oldest ") && status.stdout.contains("  paused: greet for "), "\(status.stdout)")
        #expect(status.stdout.split(separator: "\n").first?.hasSuffix(", 2 pending, 0 scheduled, 1 paused name") == true, "\(status.stdout)")
        let json = try jsonObject(try await Self.bus(database.url, "bus", "status", "--json").stdout)
        #expect((json["paused"] as? [[String: Any]])?.map { $0["command"] as? String } == ["greet"])
        let url = try #require(dashboardURL(in: host.output))
        let metrics = try await DashboardTests.http("GET", url + "/metrics").body
        #expect(metrics.contains(#"cmdbus_bus_paused{command="greet"} 1"#))

        let resume = try await Self.bus(database.url, "bus", "resume", "greet")
        #expect(resume.status == 0 && resume.stdout == "resumed 'greet': hosts claim it again (2 pending)\n", "\(resume.stdout)")
        let waited = try await waiting
        #expect(waited.status == 0 && waited.stdout.contains("Hello, Grace!"), "\(waited.stdout)\(waited.stderr)")
        #expect(waited.stderr.contains("cmdbus: 'greet' is paused on the bus: this run waits until 'cmdbus bus resume greet' (Ctrl-C cancels it)"))
        #expect(await waitUntil(.seconds(10)) { (try? await database.sql("SELECT state FROM cmdbus.commands WHERE id = '\(id)'")) == "succeeded\n" })
        #expect(try await Self.bus(database.url, "bus", "resume", "greet").stdout == "'greet' was not paused (0 pending)\n")

        // The dashboard's queue buttons: pause, and the row and its badge; then resume.
        let token = try #require(try await DashboardTests.http("GET", url + "/").body.split(separator: "\"").first { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }.map(String.init))
        #expect(try await DashboardTests.http("POST", url + "/api/queues/greet/pause", headers: ["X-Cmdbus-Token": token]).status == 200)
        #expect(try await database.sql("SELECT paused_by LIKE '%(dashboard)' FROM cmdbus.paused WHERE name = 'greet'") == "t\n")
        let page = try await DashboardTests.browse(url + "/#/hosts", waitFor: "[...document.querySelectorAll('main button')].some(b => b.textContent === 'Resume') && document.querySelector('.badge.paused') !== null", shot: "bus-paused.png")
        #expect(page.waited)
        #expect(try await DashboardTests.http("POST", url + "/api/queues/greet/resume", headers: ["X-Cmdbus-Token": token]).status == 200)
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.paused") == "0\n")

        // --all: every name the host handles (and any with commands waiting), then every paused one.
        #expect(try await Self.bus(database.url, "bus", "pause", "gret").status == 0)
        let all = try await Self.bus(database.url, "bus", "pause", "--all")
        #expect(all.status == 0 && all.stdout.contains("paused 'greet': no host claims it until 'cmdbus bus resume greet'"), "\(all.stdout)\(all.stderr)")
        #expect(!all.stdout.contains("'gret'"), "only what the host handles, and what waits: \(all.stdout)")
        let held = try await Self.bus(database.url, "run", "greet", "-p", "name=Ada", "--no-wait").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try await Task.sleep(for: .seconds(2))
        #expect(try await database.sql("SELECT state FROM cmdbus.commands WHERE id = '\(held)'") == "pending\n")
        let resumed = try await Self.bus(database.url, "bus", "resume", "--all")
        #expect(resumed.stdout.contains("resumed 'greet': hosts claim it again (1 pending)") && resumed.stdout.contains("resumed 'gret'"), "\(resumed.stdout)")
        #expect(await waitUntil(.seconds(10)) { (try? await database.sql("SELECT state FROM cmdbus.commands WHERE id = '\(held)'")) == "succeeded\n" })
        #expect(try await Self.bus(database.url, "bus", "resume", "--all").stdout == "nothing to resume: no command name is paused\n")
        let both = try await cmdbus(["bus", "pause", "--all", "greet", "--bus", database.url])
        #expect(both.status == 64 && both.stderr == "cmdbus: error: --all pauses every command name; give the names ('greet'…) or --all, not both\n", "\(both.stderr)")

        // A host whose cmdbus predates pauses offers no busSchemaVersion: it is warned of.
        try await database.sql("UPDATE cmdbus.hosts SET catalog = catalog - 'busSchemaVersion'")
        let warned = try await Self.bus(database.url, "bus", "pause", "greet")
        #expect(warned.stderr.contains("runs a cmdbus from before pauses and claims 'greet' all the same; upgrade it"), "\(warned.stderr)")
    }
}
