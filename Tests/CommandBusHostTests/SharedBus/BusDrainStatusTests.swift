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

extension SharedBusTests {
    /// A rolling restart, as a deploy does it: two hosts, a queue of short commands, and one
    /// host after another stopped with SIGTERM (it drains) and replaced. Every command runs
    /// exactly once: a drain writes what it finished before it hands back the rest.
    @Test(.timeLimit(.minutes(3)))
    func aRollingRestartRunsEveryCommandOnce() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let runs = scratch.file("runs.txt")
        var hosts = [
            try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], lease: "5", drain: "20"),
            try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], lease: "5", drain: "20"),
        ]
        let count = 60
        let lines = (0..<count).map { _ in #"{"command":"fixture.append","payload":{"file":"\#(runs.path)","milliseconds":400}}"# }
        let input = scratch.file("commands.ndjson")
        try (lines.joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
        let posted = try await Self.bus(database.url, "batch", input.path, "--no-wait")
        #expect(posted.status == 0, "\(posted.stderr)")
        for _ in 0..<3 {
            try await Task.sleep(for: .milliseconds(800))
            await hosts.removeFirst().stop()
            hosts.append(try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], lease: "5", drain: "20"))
        }
        let last = hosts
        defer { Task { for host in last { await host.stop() }; await database.drop() } }
        #expect(await waitUntil(.seconds(60)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'succeeded'")) == "\(count)\n"
        })
        let ran = Self.lines(runs).map { String($0.split(separator: " ")[0]) }
        #expect(ran.count == count && Set(ran).count == count, "\(ran.count) runs of \(Set(ran).count) commands")
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE attempt <> 1") == "0\n")
    }
}
