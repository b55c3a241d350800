import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// `bus retry NAME`: every dead letter of the name goes back to pending together and runs
    /// again; `--since` keeps to those that ended lately, `--state cancelled` takes the cancelled;
    /// an option another verb reads is refused, not ignored.
    @Test(.timeLimit(.minutes(3)))
    func retryingANameRunsItsDeadLettersAgain() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"])
        defer { Task { await host.stop(); await database.drop() } }
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let lines = scratch.file("fail.ndjson")
        try Data((String(repeating: #"{"command": "fixture.fail", "payload": {"message": "down"}}"# + "\n", count: 5)
            + #"{"command": "fixture.whoami", "payload": {}}"#).utf8).write(to: lines)
        #expect(try await Self.bus(database.url, "batch", lines.path).status == 1)
        // Two ended two hours ago: --since 1h leaves them.
        try await database.sql("""
            UPDATE cmdbus.commands SET finalized_at = now() - interval '2 hours' WHERE id IN (SELECT id FROM cmdbus.commands WHERE name = 'fixture.fail' ORDER BY seq LIMIT 2)
            """)
        let recent = try await Self.bus(database.url, "bus", "retry", "fixture.fail", "--since", "1h")
        #expect(recent.status == 0 && recent.stdout == "retried 3 'fixture.fail' commands that ended failed or timedOut within 1h: pending again, for the hosts to run\n", "\(recent.stdout)\(recent.stderr)")
        #expect(await waitUntil(.seconds(30)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE name = 'fixture.fail' AND state = 'failed' AND finalized_at > now() - interval '1 minute'")) == "3\n"
        })
        let all = try await Self.bus(database.url, "bus", "retry", "fixture.fail", "fixture.whoami", "--json")
        #expect(all.stdout == #"{"command":"fixture.fail","retried":5}"# + "\n" + #"{"command":"fixture.whoami","retried":0}"# + "\n", "\(all.stdout)")
        #expect(await waitUntil(.seconds(30)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE name = 'fixture.fail' AND state = 'failed' AND attempt = 1")) == "5\n"
        })

        // Cancelled ones only when asked.
        #expect(try await Self.bus(database.url, "bus", "pause", "fixture.whoami").status == 0)
        #expect(try await Self.bus(database.url, "run", "fixture.whoami", "--no-wait").status == 0)
        #expect(try await Self.bus(database.url, "bus", "cancel", "fixture.whoami").status == 0)
        #expect(try await Self.bus(database.url, "bus", "retry", "fixture.whoami").stdout.hasPrefix("'fixture.whoami' had no command that ended failed or timedOut to retry"))
        #expect(try await Self.bus(database.url, "bus", "retry", "fixture.whoami", "--state", "cancelled").stdout.hasPrefix("retried 1 'fixture.whoami' command that ended cancelled"))
        #expect(try await Self.bus(database.url, "bus", "resume", "fixture.whoami").status == 0)
        #expect(await waitUntil(.seconds(30)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE name = 'fixture.whoami' AND state = 'succeeded'")) == "2\n"
        })

        for (arguments, message) in [
            (["retry"], "'cmdbus bus retry' needs the command names whose failed commands to run again ('cmdbus journal list --bus --state failed' lists them; 'cmdbus journal retry ID' retries one)"),
            (["retry", "fixture.fail", "--state", "succeeded"], "--state takes failed, timedOut, cancelled (the states a command is retried from), got 'succeeded'"),
            (["retry", "fixture.fail", "--since", "soon"], "--since takes a duration such as 30, 30s, 500ms, 5m, 2h or 30d, at most "),
            (["status", "--every", "1h"], "--every is for 'cmdbus bus periodic', not 'bus status', which would ignore it; leave it out"),
            (["pause", "fixture.fail", "--running"], "--running is for 'cmdbus bus cancel', not 'bus pause', which would ignore it; leave it out"),
            (["cancel", "fixture.fail", "--state", "failed"], "--state is for 'cmdbus bus retry', not 'bus cancel', which would ignore it; leave it out"),
        ] {
            let refused = try await cmdbus(["bus"] + arguments + ["--bus", database.url])
            #expect(refused.status == 64 && refused.stderr.hasPrefix("cmdbus: error: \(message)"), "\(arguments): \(refused.stderr)")
        }
    }
}
