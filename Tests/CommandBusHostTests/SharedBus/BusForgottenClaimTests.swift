import CommandBusSupport
import Foundation
import Testing

/// A command the bus says a live host runs, which the host does not know of (a claim whose
/// answer was lost after it committed), goes back to the bus within a lease and runs; what
/// the host does run, however long, stays its own.
@Suite(.serialized, .enabled(if: SharedBusDatabase.isAvailable, "needs the PostgreSQL that scripts/test.sh starts"))
struct BusForgottenClaimTests {
    /// Found reading the heartbeat: only a dead host's commands were taken back, so a row left
    /// `running` under a live host that never heard of it stayed so for as long as the host lived.
    @Test(.timeLimit(.minutes(2)))
    func aCommandTheHostLostTrackOfGoesBackAndRunsAndWhatItRunsStays() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so", "libFixturePlugin.so"], lease: "1")
        defer { Task { await host.stop(); await database.drop() } }
        // What the host does run, past several leases: a command, and a local subcommand of another.
        async let slept = cmdbus(["run", "fixture.sleep", "-p", "milliseconds=3500", "--bus", database.url])
        async let sleptVia = cmdbus(["run", "fixture.sleep-via", "-p", "milliseconds=3500", "--bus", database.url])
        // As a claim whose answer was lost leaves it: running under this host, claimed an hour ago.
        let hostID = try await database.sql("SELECT id FROM cmdbus.hosts").trimmingCharacters(in: .whitespacesAndNewlines)
        let lost = UUID()
        try await database.sql("""
            INSERT INTO cmdbus.commands (id, name, payload, correlation_id, state, attempt, lease_owner, started_at)
            VALUES ('\(lost)', 'greet', convert_to('{"name":"Lost"}', 'UTF8'), '\(lost)', 'running', 1, '\(hostID)', now() - interval '1 hour')
            """)
        let ran = await waitUntil(.seconds(30)) {
            ((try? await database.sql("SELECT state || ' ' || attempt FROM cmdbus.commands WHERE id = '\(lost)'")) ?? "") == "succeeded 1\n"
        }
        #expect(ran, "the forgotten command never ran: \(host.output)")
        #expect(host.output.contains("gave back to the bus 1 command it said this host ran, which this host had lost track of"), "\(host.output)")
        #expect(host.output.contains(lost.uuidString), "\(host.output)")

        let (sleep, sleepVia) = try await (slept, sleptVia)
        #expect(sleep.status == 0 && sleepVia.status == 0, "\(sleep.stderr) \(sleepVia.stderr)")
        // Each ran once: none of them was given back while it ran.
        let attempts = try await database.sql("SELECT name || ' ' || attempt || ' ' || state FROM cmdbus.commands WHERE name LIKE 'fixture.%' ORDER BY name")
        #expect(attempts == "fixture.sleep 1 succeeded\nfixture.sleep 1 succeeded\nfixture.sleep-via 1 succeeded\n", "\(attempts)")
        #expect(host.output.components(separatedBy: "gave back to the bus").count == 2, "only the forgotten one went back: \(host.output)")
    }
}
