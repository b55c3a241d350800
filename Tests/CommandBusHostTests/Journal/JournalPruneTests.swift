import CommandBusSupport
import Foundation
import Testing

/// `cmdbus journal prune --older-than AGE`: whole trees of work that ended before the cutoff
/// go; newer ones, unfinished ones and (with `--state`) other outcomes stay.
struct JournalPruneTests {
    typealias Setup = JournalReliabilityTests.Setup

    @Test func pruningRemovesWholeOldTreesAndKeepsTheRest() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        try setup.plugins.install("libGreetAll.so")
        #expect(try await setup.run("run", "greet-all", "-p", #"names=["Ada","Grace"]"#).status == 0)  // a root and two subcommands
        #expect(try await setup.run("run", "greet", "-p", "name=Old").status == 0)
        #expect(try await setup.run("run", "fixture.fail", "-p", "message=old failure").status == 1)
        // One left running by a process killed mid-command: unfinished, never pruned.
        let killed = try launchedChild(
            try TestPaths.product("cmdbus").path,
            ["run", "fixture.sleep", "-p", "milliseconds=60000", "--journal", setup.journal, "--plugins", setup.plugins.path],
            directory: setup.work.path, standardOutput: .discard, standardError: .discard
        )
        #expect(await waitUntil(.seconds(30)) { JournalCommandTests.runningCount(setup.journal) == 1 })
        killed.send(SIGKILL)
        _ = await killed.wait()
        // What ended so far ended two days ago, as far as the journal knows: the cutoff of a day
        // then falls between it and what comes next, however slowly a loaded machine runs the
        // steps below (with a second's cutoff and a pause, "New" had aged past it by the last one).
        let backdated = try await runProcess("/usr/bin/env", [
            "python3", "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('UPDATE endings SET finished_at = finished_at - 172800 WHERE finished_at IS NOT NULL'); c.commit()",
            setup.journal,
        ])
        try #require(backdated.status == 0, "\(backdated.stderr)")
        #expect(try await setup.run("run", "greet", "-p", "name=New").status == 0)

        // A dry run counts what would go, and the journal keeps all seven.
        let counted = try await setup.run("journal", "prune", "--older-than", "1d", "--state", "succeeded", "--dry-run")
        #expect(counted.status == 0 && counted.stdout.hasPrefix("would remove 4 entries that ended before "), "\(counted.stdout)\(counted.stderr)")
        let countedJSON = try await setup.run("journal", "prune", "--older-than", "1d", "--dry-run", "--json")
        #expect(try jsonObject(countedJSON.stdout)["wouldRemove"] as? Int == 5, "\(countedJSON.stdout)\(countedJSON.stderr)")
        #expect(try await setup.entries().count == 7)
        let succeeded = try await setup.run("journal", "prune", "--older-than", "1d", "--state", "succeeded")
        #expect(succeeded.status == 0 && succeeded.stdout.hasPrefix("removed 4 entries that ended before "), "\(succeeded.stdout)\(succeeded.stderr)")
        #expect(try await setup.entries().compactMap { $0["command"] as? String }.sorted() == ["fixture.fail", "fixture.sleep", "greet"])

        let rest = try await setup.run("journal", "prune", "--older-than", "1d", "--json")
        #expect(try rest.status == 0 && jsonObject(rest.stdout)["removed"] as? Int == 1, "\(rest.stdout)\(rest.stderr)")
        let left = try await setup.entries()
        #expect(left.map { "\($0["command"] ?? "") \($0["state"] ?? "")" }.sorted() == ["fixture.sleep running", "greet succeeded"])
        #expect((left.first { $0["command"] as? String == "greet" }?["payload"] as? [String: Any])?["name"] as? String == "New")
        // Nothing old is left: pruning again removes nothing.
        #expect(try await setup.run("journal", "prune", "--older-than", "1d").stdout.hasPrefix("removed 0 entries"))
    }

    /// `serve --keep AGE` prunes as it runs: a command gone past AGE leaves the journal, and
    /// the log says so. The newest stays, holding the journal's numbering.
    @Test func aServerKeepsOnlyWhatEndedWithinItsKeep() async throws {
        let server = try await ServerTests.Server(arguments: ["--keep", "2s"])
        defer { server.work.remove() }
        for name in ["Ada", "Lin"] {
            #expect(try await cmdbus(["run", "greet", "-p", "name=\(name)", "--connect", server.socket]).status == 0)
        }
        @Sendable func logged() -> String { (try? String(contentsOfFile: server.log, encoding: .utf8)) ?? "" }
        #expect(await waitUntil(.seconds(30)) { logged().contains("pruned 1 journal entry that ended before ") }, "\(logged())")
        await server.stop()
        let left = try await cmdbus(["journal", "list", "--journal", server.journal], directory: server.work.url)
        #expect(left.status == 0 && left.stdout.split(separator: "\n").count == 1 && left.stdout.hasPrefix("2 "), "\(left.stdout)")
        let refused = try await cmdbus("serve", "--keep", "1d", "--no-journal")
        #expect(refused.status == 64 && refused.stderr.contains("--keep prunes the journal, and --no-journal keeps none"), "\(refused.stderr)")
    }

    @Test(arguments: [
        (["journal", "prune"], "'cmdbus journal prune' needs --older-than AGE (such as 30d or 12h)"),
        (["journal", "prune", "--older-than", "soon"], "--older-than takes a duration such as 30, 30s, 500ms, 5m, 2h or 30d"),
        (["journal", "prune", "--older-than", "1d", "--state", "pending"], "--state for 'journal prune' takes succeeded, failed, cancelled or timedOut, got 'pending'"),
        (["journal", "list", "--older-than", "1d"], "--older-than is for 'cmdbus journal prune', not 'journal list'"),
        (["journal", "replay", "--dry-run"], "--dry-run is for 'cmdbus journal prune', not 'journal replay'"),
    ])
    func badPruneLinesSayWhatIsWrong(arguments: [String], message: String) async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        #expect(try await setup.run("run", "greet", "-p", "name=Ada").status == 0)
        let result = try await setup.run(arguments)
        #expect(result.status == 64 && result.stderr.contains(message) && result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
    }
}

extension SharedBusTests {
    /// The shared bus prunes as the file does: old trees and their events go, newer ones stay.
    @Test(.timeLimit(.minutes(2)))
    func pruningTheBusRemovesWholeOldTrees() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so", "libGreetAll.so"])
        #expect(try await Self.bus(database.url, "run", "greet-all", "-p", #"names=["Ada","Grace"]"#).status == 0)
        #expect(try await Self.bus(database.url, "run", "greet", "-p", "name=Old").status == 0)
        // Ended two days ago, as far as the bus knows: "New" stays younger than a day's cutoff
        // however slowly the steps below run (a second's cutoff could catch it up).
        _ = try await database.sql("UPDATE cmdbus.commands SET finalized_at = finalized_at - interval '2 days' WHERE finalized_at IS NOT NULL")
        #expect(try await Self.bus(database.url, "run", "greet", "-p", "name=New").status == 0)
        let counted = try await Self.bus(database.url, "journal", "prune", "--older-than", "1d", "--dry-run", "--json")
        #expect(try counted.status == 0 && jsonObject(counted.stdout)["wouldRemove"] as? Int == 4, "\(counted.stdout)\(counted.stderr)")
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE kind = 'command'") == "5\n")
        let pruned = try await Self.bus(database.url, "journal", "prune", "--older-than", "1d", "--json")
        #expect(try pruned.status == 0 && jsonObject(pruned.stdout)["removed"] as? Int == 4, "\(pruned.stdout)\(pruned.stderr)")
        #expect(try await database.sql("SELECT string_agg(name, ',') FROM cmdbus.commands WHERE kind = 'command'") == "greet\n")
        // The events left are the kept tree's: none of a removed tree's stays behind.
        let orphans = try await database.sql("SELECT count(*) FROM cmdbus.events e WHERE NOT EXISTS (SELECT 1 FROM cmdbus.commands c WHERE c.id = e.correlation_id)")
        #expect(orphans == "0\n")
        await host.stop()
    }

    /// A host with `--keep` prunes the shared bus as it runs.
    @Test(.timeLimit(.minutes(2)))
    func aBusHostKeepsOnlyWhatEndedWithinItsKeep() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"], extra: ["--keep", "2s"])
        #expect(try await Self.bus(database.url, "run", "greet", "-p", "name=Ada").status == 0)
        #expect(await waitUntil(.seconds(30)) { host.output.contains("pruned 1 journal entry that ended before ") }, "\(host.output)")
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE kind = 'command'") == "0\n")
        await host.stop()
    }
}
