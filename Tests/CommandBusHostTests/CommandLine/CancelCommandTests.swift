import Foundation
import Testing

/// `cmdbus cancel`: commands in flight on a server or on the shared bus, by their ids.
extension ServerTests {
    /// A posted command is cancelled by its id and ends `cancelled` in the server's journal; an
    /// id no longer in flight exits 1 saying where to look, and a malformed one is a usage error.
    @Test(.timeLimit(.minutes(2)))
    func cancelStopsAPostedCommandOnTheServer() async throws {
        let server = try await Server()
        defer { server.work.remove() }
        let connect = "--connect=\(server.socket)"
        let posted = try await cmdbus(["run", "fixture.sleep", "-p", "milliseconds=60000", "--no-wait", connect])
        let id = posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(posted.status == 0 && UUID(uuidString: id) != nil, "\(posted.stderr)")
        // `status` names what has been in flight longest, with the id to cancel it by.
        let status = try await cmdbus(["status", connect])
        #expect(status.stdout.contains("oldest in flight (cancel with 'cmdbus cancel ID'):\n  fixture.sleep \(id) running for "), "\(status.stdout)")
        let figures = try jsonObject(try await cmdbus(["status", connect, "--json"]).stdout)
        #expect((figures["oldestInFlight"] as? [[String: Any]])?.first?["commandId"] as? String == id)
        let cancelled = try await cmdbus(["cancel", id, connect])
        #expect(cancelled.status == 0 && cancelled.stdout == "cancelled \(id)\n", "\(cancelled.stderr)")
        #expect(await waitUntil(.seconds(20)) { await ServerTests.inFlight(server.socket) == 0 })
        let again = try await cmdbus(["cancel", id, connect])
        #expect(again.status == 1 && again.stderr.contains("\(id) was not in flight on the server (it ended, or is a subcommand: cancel its root); 'cmdbus journal show \(id)' says how it ended"), "\(again.stderr)")
        let malformed = try await cmdbus(["cancel", "nope", connect])
        #expect(malformed.status == 64 && malformed.stderr.contains("'nope' is not a command id (a UUID)"), "\(malformed.stderr)")
        await server.stop()
        let entry = try await cmdbus(["journal", "show", id, "--journal", server.journal])
        #expect(try jsonObject(entry.stdout)["state"] as? String == "cancelled", "\(entry.stdout)")
    }
}

extension ServerTests {
    /// What a server runs again after a crash is cancelled as a client's command is: it was not
    /// in the server's table, so `cancel` said it was not in flight while it ran.
    @Test(.timeLimit(.minutes(2)))
    func cancelStopsACommandTheServerRecovered() async throws {
        let first = try await Server()
        defer { first.work.remove() }
        let posted = try await cmdbus(["run", "fixture.sleep", "-p", "milliseconds=60000", "--no-wait", "--connect=\(first.socket)"])
        let id = posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(posted.status == 0, "\(posted.stderr)")
        first.process.send(SIGKILL)
        _ = await waitUntil(.seconds(20)) { !first.process.isRunning }
        let second = try await Server(work: first.work)
        #expect(await waitUntil(.seconds(20)) { await ServerTests.inFlight(second.socket) == 1 })
        let cancelled = try await cmdbus(["cancel", id, "--connect=\(second.socket)"])
        #expect(cancelled.status == 0 && cancelled.stdout == "cancelled \(id)\n", "\(cancelled.stderr)")
        #expect(await waitUntil(.seconds(20)) { await ServerTests.inFlight(second.socket) == 0 })
        await second.stop()
        let entry = try await cmdbus(["journal", "show", id, "--journal", first.journal])
        #expect(try jsonObject(entry.stdout)["state"] as? String == "cancelled", "\(entry.stdout)")
    }
}

extension SharedBusTests {
    /// On the shared bus a post of a name no host handles is kept, pending, for a host that may
    /// join later: `--no-wait` warns of it (it printed the id and nothing else), and `cancel`
    /// drops it, as it stops a running command on its host.
    @Test(.timeLimit(.minutes(3)))
    func aPostNoHostTakesIsWarnedOfAndCancelDropsIt() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"])
        defer { Task { await host.stop(); await database.drop() } }
        let running = try await Self.bus(database.url, "run", "fixture.sleep", "-p", "milliseconds=60000", "--no-wait")
        #expect(running.status == 0 && running.stderr.isEmpty, "a post a host takes is not warned of: \(running.stderr)")
        let waiting = try await Self.bus(database.url, "run", "fixture.slep", "--no-wait")
        #expect(waiting.status == 0 && waiting.stderr.contains("warning: no live host on the bus handles 'fixture.slep': what was posted waits, pending"), "\(waiting.stderr)")
        let ids = [running, waiting].map { $0.stdout.trimmingCharacters(in: .whitespacesAndNewlines) }
        @Sendable func states() async -> String? {
            try? await database.sql("SELECT string_agg(state, ',' ORDER BY seq) FROM cmdbus.commands").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(await waitUntil(.seconds(20)) { await states() == "running,pending" })
        let cancelled = try await cmdbus(["cancel"] + ids + ["--bus", database.url])
        #expect(cancelled.status == 0 && cancelled.stdout == ids.map { "cancelled \($0)\n" }.joined(), "\(cancelled.stderr)")
        let ended = await waitUntil(.seconds(20)) { await states() == "cancelled,cancelled" }
        let endedAs = await states() ?? "?"
        #expect(ended, "\(endedAs)")
        // What went in the last hour, as the dashboard's time filter asks too (it failed on the
        // bus: "function to_timestamp(text) does not exist").
        let recent = try await Self.bus(database.url, "journal", "list", "--since", "1h")
        #expect(recent.status == 0 && recent.stdout.split(separator: "\n").count == 2, "\(recent.stderr)")
        let again = try await cmdbus(["cancel", ids[1], "--bus", database.url])
        #expect(again.status == 1 && again.stderr.contains("was not in flight on the bus"), "\(again.stderr)")
    }
}
