import Foundation
import Testing

extension SharedBusTests {
    /// A host that drains (SIGTERM, up to `--drain`) claims nothing new, but `bus status` and
    /// the dashboard showed it as any live host for as long as it drained: the hosts table's
    /// `draining` column was never written. The heartbeat now says so, at once.
    @Test(.timeLimit(.minutes(2)))
    func aDrainingHostIsShownDraining() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], lease: "30", drain: "30")
        defer { Task { await host.stop(); await database.drop() } }
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let runs = scratch.file("runs.txt")
        async let slow = Self.bus(database.url, "run", "fixture.append", "-p", "file=\(runs.path)", "-p", "milliseconds=4000")
        #expect(await waitUntil(.seconds(30)) { Self.lines(runs).count == 1 })
        let before = try await Self.bus(database.url, "bus", "status")
        #expect(!before.stdout.contains("draining"), "\(before.stdout)")

        host.signal(SIGTERM)
        // Well inside the heartbeat's ten seconds (a third of the 30 s lease): the drain wakes it.
        #expect(await waitUntil(.seconds(3)) {
            (try? await Self.bus(database.url, "bus", "status").stdout)?.contains("pid \(host.pid): live, draining (claims nothing new), heartbeat ") == true
        })
        let json = try jsonObject(try await Self.bus(database.url, "bus", "status", "--json").stdout)
        #expect((json["hosts"] as? [[String: Any]])?.first?["draining"] as? Bool == true)
        let finished = try await slow
        #expect(finished.status == 0, "what it ran finishes: \(finished.stderr)")
    }
}
