import Foundation
import Testing

extension SharedBusTests {
    /// A subcommand that another host claimed is finished on the bus once, by that host's claim,
    /// with its attempt, retry and hand-back. The host's ledger of local subcommands took it for
    /// one of its own (it has a parent, and its tree runs there) and finished it too, as attempt
    /// 1 with no retry: a retryable failure ended for good at its first attempt, and the host
    /// logged "discarded the result" for about one subcommand in fifteen of a run of trees.
    @Test(.timeLimit(.minutes(3)))
    func aClaimedSubcommandIsFinishedOnceByItsClaim() async throws {
        await BusHostProcess.stopAll()  // what an earlier test left running
        let database = try await SharedBusDatabase()
        let relay = try await BusHostProcess(bus: database.url, plugins: [], fixtures: [("relay", [])], lease: "30")
        let failer = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], lease: "30")
        let greeter = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"], lease: "30")
        let sender = try await BusHostProcess(bus: database.url, plugins: ["libGreetAll.so"], lease: "30")
        defer { Task { await relay.stop(); await failer.stop(); await greeter.stop(); await sender.stop(); await database.drop() } }

        // A retryable failure is retried on the bus, up to the child's five attempts.
        let ran = try await Self.bus(database.url, "run", "relay.fail", "{}")
        #expect(ran.status == 1, "\(ran.stdout)\(ran.stderr)")
        let child = try await database.sql("SELECT state, attempt, max_attempts FROM cmdbus.commands WHERE name = 'fixture.fail'")
        #expect(child == "failed|5|5\n", "\(failer.output.suffix(2_000))")

        // Two hundred trees of five: each subcommand's result is written once, by its claim.
        try await database.insertPending(200, named: "greet-all", payload: #"{"names": ["a", "b", "c", "d", "e"]}"#)
        #expect(await waitUntil(.seconds(90)) {
            await Self.psqlNow(database.url, "SELECT count(*) FROM cmdbus.commands WHERE name = 'greet-all' AND state = 'succeeded'") == "200\n"
        })
        let greets = try await database.sql("SELECT state, attempt, count(*) FROM cmdbus.commands WHERE name = 'greet' GROUP BY 1, 2")
        #expect(greets == "succeeded|1|1000\n")
        #expect(!greeter.output.contains("discarded the result"), "\(greeter.output.suffix(2_000))")
    }

    /// A host that drains while it runs another host's subcommand hands it back, and another
    /// host runs it, as it would a command of its own, and the parent goes on (a rolling restart
    /// of the hosts). The hand-back is written before the command is cancelled here, so the
    /// ledger's end of it, 'cancelled', was refused even before it left such commands alone.
    @Test(.timeLimit(.minutes(3)))
    func aClaimedSubcommandHandedBackAtADrainRunsOnAnotherHost() async throws {
        await BusHostProcess.stopAll()  // what an earlier test left running
        let database = try await SharedBusDatabase()
        let relay = try await BusHostProcess(bus: database.url, plugins: [], fixtures: [("relay", [])], lease: "30")
        let first = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], lease: "30", drain: "1")
        defer { Task { await relay.stop(); await first.stop(); await database.drop() } }
        let posted = try await Self.bus(database.url, "run", "relay.sleep", "{}", "--no-wait")
        let parent = posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(await waitUntil(.seconds(30)) {
            await Self.psqlNow(database.url, "SELECT state FROM cmdbus.commands WHERE name = 'fixture.sleep'") == "running\n"
        })
        // The first host drains (for up to 1 s) while the second starts, as in a rolling restart:
        // started before the drain, the second's start (seconds, on a loaded machine) once took
        // so long that the 4 s child ended on the first host before its drain began.
        async let starting = BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], lease: "30")
        await first.stop()
        let second = try await starting
        defer { Task { await second.stop() } }
        #expect(await waitUntil(.seconds(60)) {
            await Self.psqlNow(database.url, "SELECT state FROM cmdbus.commands WHERE id = '\(parent)'") == "succeeded\n"
        }, "\(first.output.suffix(2_000))")
        let child = try await database.sql("SELECT state, array_length(attempted_by, 1) FROM cmdbus.commands WHERE name = 'fixture.sleep'")
        #expect(child == "succeeded|2\n")
    }
}
