import CommandBus
@testable import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// `bus cancel NAME`: every command of the name that waits (due now, or later) ends
    /// cancelled at once, and a `run --bus` waiting for one hears of it; what runs finishes,
    /// unless `--running` asks it to stop.
    @Test(.timeLimit(.minutes(3)))
    func cancellingANameEndsWhatWaitsAndLeavesWhatRuns() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], extra: ["--capacity", "1", "--http", "127.0.0.1:0"])
        defer { Task { await host.stop(); await database.drop() } }
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let lines = scratch.file("sleep.ndjson"), queue = scratch.file("queue.ndjson")
        try Data(String(repeating: #"{"command": "fixture.sleep", "payload": {"milliseconds": 1500}}"# + "\n", count: 40).utf8).write(to: lines)
        try Data(String(repeating: #"{"command": "fixture.sleep", "payload": {"milliseconds": 1500}}"# + "\n", count: 39).utf8).write(to: queue)
        /// One command of `seconds` running on the host (which runs one at a time), and 39 behind
        /// it: nothing else starts before the test cancels (a host that ends one claims the next
        /// while it writes the end, so for a moment two read as running). A CI run under load took
        /// more than 6 s from its start to the cancel, and a command of the queue had started.
        func oneRunningAndAQueue(seconds: Int) async throws {
            let payload = #"{"milliseconds": \#(seconds * 1000)}"#
            #expect(try await Self.bus(database.url, "run", "fixture.sleep", payload, "--no-wait").status == 0)
            #expect(await waitUntil(.seconds(30)) {
                (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'running'")) == "1\n"
            })
            #expect(try await Self.bus(database.url, "batch", "--no-wait", queue.path).status == 0)
        }
        try await oneRunningAndAQueue(seconds: 15)
        #expect(try await Self.bus(database.url, "run", "fixture.sleep", #"{"milliseconds": 10}"#, "--delay", "1h", "--no-wait").status == 0)
        // A run that waits for its command, behind the queue.
        let waiting = Task { try await Self.bus(database.url, "run", "fixture.sleep", #"{"milliseconds": 10}"#) }
        #expect(await waitUntil(.seconds(30)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'pending'")) == "41\n"
        })

        let cancel = try await Self.bus(database.url, "bus", "cancel", "fixture.sleep", "fixture.whoami")
        #expect(cancel.status == 0, "\(cancel.stderr)")
        #expect(cancel.stdout == """
            cancelled 41 'fixture.sleep' commands that waited; 1 running finish ('--running' asks them to stop)
            'fixture.whoami' had no command waiting

            """, "\(cancel.stdout)")
        let ended = try await waiting.value
        #expect(ended.status == 1 && ended.stderr.contains("was cancelled while it waited, by "), "\(ended.stderr)")
        #expect(await waitUntil(.seconds(60)) {
            (try? await database.sql("SELECT state, count(*) FROM cmdbus.commands GROUP BY 1 ORDER BY 1")) == "cancelled|41\nsucceeded|1\n"
        })

        // With --running, what runs is asked to stop too (a sleep that stops when asked).
        try await oneRunningAndAQueue(seconds: 60)
        let all = try await Self.bus(database.url, "bus", "cancel", "fixture.sleep", "--running", "--json")
        let outcome = try JSONSerialization.jsonObject(with: Data(all.stdout.utf8)) as? [String: Any]
        #expect(outcome?["cancelled"] as? Int == 39 && outcome?["running"] as? Int == 1, "\(all.stdout)")
        #expect(await waitUntil(.seconds(30)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state IN ('pending', 'running')")) == "0\n"
        })
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'cancelled'") == "81\n")

        // The dashboard's queue row offers it while something waits, and its API does it.
        #expect(try await Self.bus(database.url, "bus", "pause", "fixture.sleep").status == 0)
        #expect(try await Self.bus(database.url, "batch", "--no-wait", lines.path).status == 0)
        let url = try #require(dashboardURL(in: host.output))
        let page = try await DashboardTests.browse(
            url + "/#/hosts", waitFor: "[...document.querySelectorAll('main button')].some(b => b.textContent === 'Cancel waiting')", shot: "bus-cancel-waiting.png"
        )
        #expect(page.waited)
        let token = try #require(try await DashboardTests.http("GET", url + "/").body.split(separator: "\"").first { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }.map(String.init))
        let posted = try await DashboardTests.http("POST", url + "/api/queues/fixture.sleep/cancel", headers: ["X-Cmdbus-Token": token])
        #expect(posted.status == 200 && posted.body == #"{"cancelled":40,"command":"fixture.sleep"}"#, "\(posted.body)")
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE error_message LIKE '%(dashboard) (cmdbus bus cancel)'") == "40\n")

        for (arguments, message) in [
            ([String](), "'cmdbus bus cancel' needs the command names whose waiting commands to cancel ('cmdbus bus status' lists the queues; 'cmdbus cancel ID' cancels one command)"),
            (["01A21AE9-5F48-77DA-86F8-661E748A73FF"], "'01A21AE9-5F48-77DA-86F8-661E748A73FF' is a command id, not a name: 'cmdbus cancel 01A21AE9-5F48-77DA-86F8-661E748A73FF' cancels that command; 'cmdbus bus cancel NAME' cancels a name's waiting commands"),
        ] {
            let refused = try await cmdbus(["bus", "cancel"] + arguments + ["--bus", database.url])
            #expect(refused.status == 64 && refused.stderr == "cmdbus: error: \(message)\n", "\(refused.stderr)")
        }
    }

    /// A running parent asked to stop with its tree can hear of its subcommands' cancellation
    /// before its own, and fail for it: its host ends it `failed` with their "was cancelled".
    /// The bus records it `cancelled`, as it was asked; a command not asked to stop that fails
    /// for a cancellation stays `failed`.
    @Test(.timeLimit(.minutes(2)))
    func aCommandAskedToStopThatEndsForACancellationEndsCancelled() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        let host = UUID(), asked = UUID(), notAsked = UUID()
        try connection.insertHost(host, handling: ["a"])
        try connection.insertRunning(asked, on: host, askedToStop: true)
        try connection.insertRunning(notAsked, on: host, askedToStop: false)
        let ends = JSONValue.array([asked, notAsked].map {
            .object(["id": .string($0.uuidString), "attempt": .integer(1), "state": .string("failed"), "code": .string("cancelled"),
                     "message": .string("command 'a' was cancelled")])
        })
        #expect(try connection.execute(BusSQL.complete, [.text(ends.text), .uuid(host)]).all.count == 2)
        #expect(try await database.sql("SELECT state FROM cmdbus.commands ORDER BY cancel_requested DESC") == "cancelled\nfailed\n")
    }

    /// A command asked to stop is not run again: one whose handler fails in a way worth
    /// retrying ends `cancelled` (the local bus does not retry a cancelled command either), and
    /// so does one whose host died before it ended, where the rescue would have put it back to
    /// pending. Commands not asked to stop are retried and rescued as before.
    @Test(.timeLimit(.minutes(2)))
    func aCommandAskedToStopIsNotRunAgain() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        let live = UUID(), dead = UUID()
        try connection.insertHost(live, handling: ["a"])
        try connection.insertHost(dead, handling: ["a"])
        try connection.execute("UPDATE cmdbus.hosts SET heartbeat_at = now() - interval '1 hour' WHERE id = $1", [.uuid(dead)])
        func running(on host: UUID, asked: Bool) throws -> UUID {
            try connection.insertRunning(on: host, askedToStop: asked, maxAttempts: 3)
        }
        let failedAsked = try running(on: live, asked: true), failedNotAsked = try running(on: live, asked: false)
        let rescuedAsked = try running(on: dead, asked: true), rescuedNotAsked = try running(on: dead, asked: false)
        let ends = JSONValue.array([failedAsked, failedNotAsked].map {
            .object(["id": .string($0.uuidString), "attempt": .integer(1), "state": .string("failed"), "code": .string("handlerFailed"),
                     "message": .string("the service is down"), "retryAfterMs": .integer(1000)])
        })
        #expect(try connection.execute(BusSQL.complete, [.text(ends.text), .uuid(live)]).all.count == 2)
        #expect(try connection.execute(BusSQL.rescue).count == 1)
        let states = try await database.sql("""
            SELECT id, state, error_code, finalized_at IS NOT NULL, error_message FROM cmdbus.commands ORDER BY id
            """)
        func row(_ id: UUID) -> String { states.split(separator: "\n").first { $0.hasPrefix(id.uuidString.lowercased()) }.map(String.init) ?? "" }
        #expect(row(failedAsked).hasSuffix(
            "|cancelled|cancelled|t|command 'a' was cancelled: asked to stop, it failed and was not retried (the service is down)"
        ), "\(states)")
        #expect(row(failedNotAsked).hasSuffix("|pending|handlerFailed|f|the service is down"), "\(states)")
        #expect(row(rescuedAsked).hasSuffix(
            "|cancelled|cancelled|t|command 'a' was cancelled: asked to stop, its host died or lost its lease before it ended"
        ), "\(states)")
        #expect(row(rescuedNotAsked).hasSuffix("|pending||f|"), "\(states)")
    }

    /// A cancel that comes while the host that claimed the command is still asking its plugin
    /// whether to take it (an isolated plugin's `canHandle` runs in its worker) ends the command
    /// cancelled, without its handler running. It found no running command to stop and was lost:
    /// the command ran to its end, and `cancel` had said it was asked to stop.
    @Test(.timeLimit(.minutes(2)))
    func aCancelThatComesWhileItsHostDecidesIsKept() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], extra: ["--isolate"])
        defer { Task { await host.stop(); await database.drop() } }
        let posted = try await Self.bus(
            database.url, "run", "fixture.sleep", #"{"milliseconds": 5000, "decideAfterMilliseconds": 3000}"#, "--no-wait"
        )
        let id = posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(posted.status == 0 && UUID(uuidString: id) != nil, "\(posted.stderr)")
        // Claimed: the host now asks the worker, which takes three seconds to answer.
        #expect(await waitUntil(.seconds(30)) {
            (try? await database.sql("SELECT state FROM cmdbus.commands WHERE id = '\(id)'")) == "running\n"
        })
        #expect(try await Self.bus(database.url, "cancel", id).status == 0)
        #expect(await waitUntil(.seconds(60)) {
            (try? await database.sql("SELECT finalized_at IS NOT NULL FROM cmdbus.commands WHERE id = '\(id)'")) == "t\n"
        })
        let ended = try await database.sql("SELECT state, error_message FROM cmdbus.commands WHERE id = '\(id)'")
        #expect(ended == "cancelled|command 'fixture.sleep' was cancelled\n", "\(ended)")
    }

    /// A host the bus declares dead while it still decides whether to take a command does not
    /// run it once it has decided: the command is the bus's again, and runs once, on the claim
    /// that follows. The decision ended, the command started on the lease the host no longer
    /// held, and ran twice (the fence stopped only what already ran).
    @Test(.timeLimit(.minutes(2)))
    func aHostDeclaredDeadWhileItDecidesDoesNotRunTheCommand() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        // A 3 s lease: the host beats every second, and hears it was declared dead well inside
        // the four seconds its plugin takes to decide.
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], lease: "3", extra: ["--isolate"])
        defer { Task { await host.stop(); await database.drop() } }
        let runs = host.work.file("runs.txt")
        async let result = Self.bus(database.url, "run", "fixture.append", "-p", "file=\(runs.path)", "-p", "decideAfterMilliseconds=4000")
        #expect(await waitUntil(.seconds(30)) {
            (try? await database.sql("SELECT state FROM cmdbus.commands WHERE name = 'fixture.append'")) == "running\n"
        })
        // What a rescue does to a host whose lease ran out (``aHostRemovedFromTheBusCannotFinishWhatItStillHolds``).
        try await database.sql("DELETE FROM cmdbus.hosts")
        let finished = try await result
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(host.output.contains("fenced: the bus declared this host dead"), "\(host.output)")
        // Room for the first decision's run to write its line, where it ran.
        try await Task.sleep(for: .seconds(3))
        let lines = Self.lines(runs)
        #expect(lines.count == 1 && lines.first?.split(separator: " ")[1] == "2", "ran on the lost lease: \(lines)")
    }

    /// A host the bus declared dead joins again and can claim a command once more while its
    /// earlier claim of it still decides. The earlier claim's end must leave the later one as it
    /// is: a cancel that comes while the later one decides ends the command cancelled. Keyed by
    /// the command alone, the earlier end unmarked the later claim, the cancel found nothing to
    /// stop, and the command ran.
    @Test(.timeLimit(.minutes(2)))
    func aCancelReachesTheSecondClaimOfACommandOnOneHost() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], lease: "3", extra: ["--isolate"])
        defer { Task { await host.stop(); await database.drop() } }
        let runs = host.work.file("runs.txt")
        let posted = try await Self.bus(
            database.url, "run", "fixture.append", "-p", "file=\(runs.path)", "-p", "decideAfterMilliseconds=4000", "--no-wait"
        )
        let id = posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(posted.status == 0 && UUID(uuidString: id) != nil, "\(posted.stderr)")
        let attempt = "SELECT state, attempt FROM cmdbus.commands WHERE id = '\(id)'"
        #expect(await waitUntil(.seconds(30)) { (try? await database.sql(attempt)) == "running|1\n" })
        // Declared dead a second into the first decision of four (an isolated plugin has five to
        // answer): the host joins again, its rescue gives the command back, and it claims it
        // again (attempt 2), a second or more after the first, so its decision ends that much later.
        try await Task.sleep(for: .seconds(1))
        try await database.sql("DELETE FROM cmdbus.hosts")
        #expect(await waitUntil(.seconds(30)) { (try? await database.sql(attempt)) == "running|2\n" }, "\(host.output)")
        // The first decision ends (its cancelled end refused: the lease is the new claim's).
        #expect(await waitUntil(.seconds(30)) { host.output.contains("discarded the result") }, "\(host.output)")
        #expect(try await Self.bus(database.url, "cancel", id).status == 0)
        #expect(await waitUntil(.seconds(60)) {
            (try? await database.sql("SELECT finalized_at IS NOT NULL FROM cmdbus.commands WHERE id = '\(id)'")) == "t\n"
        })
        let ended = try await database.sql("SELECT state, attempt, error_message FROM cmdbus.commands WHERE id = '\(id)'")
        #expect(ended == "cancelled|2|command 'fixture.append' was cancelled\n", "\(ended)")
        #expect(Self.lines(runs).isEmpty, "ran: \(Self.lines(runs))")
    }

    /// A command cancelled in an isolated worker whose handler does not stop has that worker
    /// stopped after a grace period, and with it the other commands it ran. Those did nothing
    /// wrong: their host runs them again on its next worker, where they failed for good (a
    /// cancel of 65 running isolated `greet-all`s failed 4 of their neighbours so), and then went
    /// back to the bus for a retry, their attempt counted.
    @Test(.timeLimit(.minutes(2)))
    func theNeighboursOfACancelledCommandInAnIsolatedWorkerRunAgain() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], extra: ["--isolate"])
        defer { Task { await host.stop(); await database.drop() } }
        func post(milliseconds: Int) async throws -> String {
            let payload = #"{"milliseconds": \#(milliseconds), "stubborn": true}"#
            let posted = try await Self.bus(database.url, "run", "fixture.sleep", payload, "--no-wait")
            #expect(posted.status == 0, "\(posted.stderr)")
            return posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // The one cancelled would run for a minute: under load the cancel once reached it more
        // than two seconds into a run of three, and the handler ended first ('succeeded'). The
        // neighbour runs long enough to be under way still when its worker is stopped.
        let cancelled = try await post(milliseconds: 60_000), neighbour = try await post(milliseconds: 8_000)
        #expect(await waitUntil(.seconds(30)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE state = 'running'")) == "2\n"
        })
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await Self.bus(database.url, "cancel", cancelled).status == 0)
        #expect(await waitUntil(.seconds(60)) {
            (try? await database.sql("SELECT count(*) FROM cmdbus.commands WHERE finalized_at IS NULL")) == "0\n"
        })
        let ended = try await database.sql("SELECT state, attempt FROM cmdbus.commands WHERE id = '\(cancelled)'")
            + database.sql("SELECT state, attempt FROM cmdbus.commands WHERE id = '\(neighbour)'")
        // The neighbour ran again on its host, on the next worker: its attempt on the bus is the first.
        #expect(ended == "cancelled|1\nsucceeded|1\n", "\(ended)")
    }

    /// A command asked to stop that its host gives back to the bus ends `cancelled` there
    /// too, rather than going back to pending for the next host to end: a drain's hand-back,
    /// one handed back by a host that could not renew its lease, and one every handler on its
    /// host declined. One not asked to stop goes back to pending, its attempt not counted.
    @Test(.timeLimit(.minutes(2)))
    func aCommandAskedToStopThatIsGivenBackEndsCancelled() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        let host = UUID(), other = UUID()
        try connection.insertHost(host, handling: ["a"])
        try connection.insertHost(other, handling: ["a"])
        func running(asked: Bool) throws -> UUID {
            try connection.insertRunning(on: host, askedToStop: asked)
        }
        func ended(_ id: UUID) async throws -> String {
            try await database.sql("SELECT state, attempt, coalesce(error_message, '') FROM cmdbus.commands WHERE id = '\(id)'")
        }
        let declined = try running(asked: true)
        #expect(try connection.execute(BusSQL.decline, [.uuid(declined), .uuid(host), .integer(1), .text("h")]).count == 1)
        #expect(try await ended(declined) == "cancelled|0|command 'a' was cancelled: asked to stop, it was declined\n")

        let lapsed = try running(asked: true)
        try connection.execute(BusSQL.handBackOne, [.uuid(lapsed), .uuid(host), .integer(1)])
        #expect(try await ended(lapsed) == "cancelled|1|command 'a' was cancelled: asked to stop, its host could not renew its lease before it ended\n")

        let drained = try running(asked: true), notAsked = try running(asked: false)
        let back = try connection.execute(BusSQL.handBack, [.uuid(host)])[row: 0]
        #expect(back.integer("back") == 1 && back.integer("cancelled") == 1)
        #expect(try await ended(drained) == "cancelled|1|command 'a' was cancelled: asked to stop, its host left the bus before it ended\n")
        #expect(try await ended(notAsked) == "pending|0|\n")
    }
}
