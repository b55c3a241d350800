import Foundation
import Testing

extension SharedBusTests {
    /// Found by hand: an event a plugin emitted with a NUL character in its payload was refused
    /// by PostgreSQL (`jsonb` keeps no NUL), and the host retried the batch for ever, writing no
    /// ending behind it: that command, and every one after it on the host, stayed running. A
    /// failure's message with a NUL was refused the same way. Both now reach the bus with U+FFFD
    /// in the NUL's place.
    @Test(.timeLimit(.minutes(3)))
    func aNulCharacterInAnEventOrAFailureHoldsUpNoEnding() async throws {
        await BusHostProcess.stopAll()  // what an earlier test left running
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"], fixtures: [("nul_text", [])], lease: "30")
        defer { Task { await host.stop(); await database.drop() } }

        let ran = try await Self.bus(database.url, "run", "nul.event", "{}")
        #expect(ran.status == 0 && ran.stdout == #"{"r":"a\u0000b"}"# + "\n", "\(ran.stdout)\(ran.stderr)\(host.output.suffix(1_000))")
        #expect(try await database.sql("SELECT event->'payload'->>'t' FROM cmdbus.events ORDER BY seq") == "a\u{FFFD}b\nok\n")
        let failed = try await Self.bus(database.url, "run", "nul.fail", "{}")
        #expect(failed.status == 1 && failed.stderr.contains("bad\u{FFFD}byte"), "\(failed.stderr)\(host.output.suffix(1_000))")
        // The host's later commands end as before, and nothing was retried.
        #expect(try await Self.bus(database.url, "run", "greet", #"{"name": "Ada"}"#).status == 0)
        #expect(!host.output.contains("retrying"), "\(host.output.suffix(2_000))")
    }
}
