import Foundation
import Testing

/// Connections the server closes while they sit idle (`idle_session_timeout`, a pooler's or a
/// NAT's idle timer) are replaced quietly before the next statement goes out on them.
@Suite(.serialized, .enabled(if: SharedBusDatabase.isAvailable, "needs the PostgreSQL that scripts/test.sh starts"))
struct BusIdleConnectionTests {
    /// Found by hand: on a database that closes sessions idle for 2 s, a host warned of a lost
    /// connection at every heartbeat and every end ("heartbeat failed (lost the connection …);
    /// not claiming until it succeeds"), and stopped claiming until the next one, though each
    /// statement went through on a new connection a moment later.
    @Test(.timeLimit(.minutes(2)))
    func aHostWhoseIdleConnectionsAreClosedSaysNothingAndGoesOn() async throws {
        let database = try await SharedBusDatabase()
        try await SharedBusDatabase.psql(SharedBusDatabase.clusterURL, "ALTER DATABASE \(database.name) SET idle_session_timeout = '1500ms'")
        // A heartbeat every 2 s, and an end every 2.5 s: each finds its connection closed. (The
        // claimer's goes out every second, within the limit.)
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"], lease: "6")
        defer { Task { await host.stop(); await database.drop() } }
        for name in ["Ada", "Grace", "Barbara"] {
            let greeted = try await cmdbus(["run", "greet", "-p", "name=\(name)", "--bus", database.url])
            #expect(greeted.status == 0 && greeted.stdout.contains("Hello, \(name)!"), "\(greeted.stderr)")
            try await Task.sleep(for: .seconds(2.5))
        }
        let warnings = host.output.split(separator: "\n").filter { $0.contains("warning") && !$0.contains("debug build") }
        #expect(warnings.isEmpty, "\(warnings.joined(separator: "\n"))")
    }
}
