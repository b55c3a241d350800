import Foundation
import Testing

extension SharedBusTests {
    /// Commands posted for a name no live host handles wait until a host whose plugins do
    /// joins; `bus status` and the dashboard's queues say so beside the queue, where before
    /// the row read like any other backlog. A name a host handles, waiting for later, is not marked.
    /// So it goes for a periodic command: its entry said nothing of it, in `bus status` and on
    /// the dashboard, while what it posted would wait (only `bus periodic` warned, when it was set).
    @Test(.timeLimit(.minutes(3)))
    func aQueueNoLiveHostHandlesIsMarked() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], extra: ["--http", "127.0.0.1:0"])
        defer { Task { await host.stop(); await database.drop() } }
        #expect(await waitUntil(.seconds(30)) { host.output.contains("dashboard on ") })
        let posted = try await Self.bus(database.url, "run", "greet", #"{"name": "Ada"}"#, "--no-wait")
        #expect(posted.status == 0 && posted.stderr.contains("no live host on the bus handles 'greet'"), "\(posted.stderr)")
        #expect(try await Self.bus(database.url, "run", "fixture.whoami", "--delay", "1h", "--no-wait").status == 0)
        #expect(try await Self.bus(database.url, "bus", "periodic", "greet", "--every", "1h", "--as", "hourly-greet").status == 0)
        #expect(try await Self.bus(database.url, "bus", "periodic", "fixture.whoami", "--every", "1h").status == 0)

        let status = try await Self.bus(database.url, "bus", "status")
        let lines = status.stdout.split(separator: "\n")
        let greet = try #require(lines.first { $0.hasPrefix("  greet:") }, "\(status.stdout)")
        let whoami = try #require(lines.first { $0.hasPrefix("  fixture.whoami:") }, "\(status.stdout)")
        #expect(greet.hasSuffix("; no live host handles it"), "\(greet)")
        #expect(!whoami.contains("no live host"), "\(whoami)")
        let hourly = try #require(lines.first { $0.hasPrefix("  periodic: hourly-greet:") }, "\(status.stdout)")
        let periodicWhoami = try #require(lines.first { $0.hasPrefix("  periodic: fixture.whoami:") }, "\(status.stdout)")
        #expect(hourly.hasSuffix("; posted 0; no live host handles it"), "\(hourly)")
        #expect(!periodicWhoami.contains("no live host"), "\(periodicWhoami)")

        let url = try #require(dashboardURL(in: host.output))
        let marked = "[...document.querySelectorAll('main tr')].filter(r => [...r.querySelectorAll('.badge')].some(b => b.textContent === 'no live host')).map(r => r.cells[0].firstChild.textContent).join(',')"
        let page = try await DashboardTests.browse(
            url + "/#/hosts", waitFor: "document.querySelectorAll('main table').length >= 3 && (\(marked)) !== ''",
            shot: "bus-unhandled-queue.png",
            evals: [marked, "getComputedStyle(document.querySelector('.badge.failed')).fontFamily.includes('monospace')"]
        )
        #expect(page.waited && page.exceptions.isEmpty, "\(page.exceptions)")
        #expect(page.results.first as? String == "greet,hourly-greet", "\(page.results)")
        // A badge in a name's cell is in the page's own type, not the name's monospace.
        #expect(page.results.dropFirst().first as? Bool == false, "\(page.results)")
    }
}
