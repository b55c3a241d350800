import CommandBusSQLite
@testable import CommandBusCLI
import CommandBusSupport
import Foundation
import Testing

/// `cmdbus journal ...` and `cmdbus batch` end to end.
struct JournalCommandTests {
    typealias Setup = JournalReliabilityTests.Setup

    @Test func undoSendsTheInverseAndLinksTheTwo() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        _ = try await setup.run("run", "counter.add", "-p", "counter=u", "-p", "by=2")
        _ = try await setup.run("run", "counter.add", "-p", "counter=u", "-p", "by=3")
        let undo = try await setup.run("journal", "undo")
        #expect(undo.status == 0, "\(undo.stderr)")
        #expect(try jsonObject(undo.stdout)["value"] as? Int == 2)
        #expect(try await setup.counter("u") == 2)
        let entries = try await setup.entries(command: "counter.add")
        #expect(entries.count == 3)
        let undone = try #require(entries.first { $0["undoneBy"] is String })
        let inverse = try #require(entries.first { $0["undoOf"] is String })
        #expect(undone["undoneBy"] as? String == inverse["id"] as? String)
        #expect((inverse["payload"] as? [String: Any])?["by"] as? Int == -3)

        let again = try await setup.run("journal", "undo", try #require(undone["id"] as? String))
        #expect(again.status == 1 && again.stderr.contains("was already undone by"))
    }

    /// `journal list` reads a page of entries at a time: across the pages' edges every entry is
    /// listed once, in order, as lines and as one JSON array; `--limit` past a page keeps the
    /// newest; a reader that stops early stops the listing.
    @Test func aListLongerThanAPageIsWholeAndInOrder() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        let count = 2 * 1_000 + 1
        let batch = try await setup.run("batch", try setup.batchFile(count, counter: "pages"))
        #expect(batch.status == 0, "\(batch.stderr)")
        let lines = try await setup.run("journal", "list").stdout.split(separator: "\n")
        #expect(lines.count == count)
        #expect(lines.map { Int($0.prefix { $0 != " " }) } == (1...count).map { $0 })
        let entries = try await setup.entries()
        #expect(entries.map { $0["sequence"] as? Int } == (1...count).map { $0 })
        let newest = try await setup.run("journal", "list", "--limit", "1500").stdout.split(separator: "\n")
        #expect(newest.map { Int($0.prefix { $0 != " " }) } == ((count - 1_499)...count).map { $0 })
        let empty = try await setup.run("journal", "list", "--json", "--state", "cancelled")
        #expect(empty.status == 0 && empty.stdout == "[]\n")
        let head = try await runProcess("/bin/sh", ["-c", "\"$0\" journal list --journal \"$1\" | head -n 1", try TestPaths.product("cmdbus").path, setup.journal])
        #expect(head.status == 0 && head.stdout.hasPrefix("1  "), "\(head.stderr)")
    }

    /// An option another verb reads is refused rather than ignored (`list --since` listed
    /// everything), and a time bound that is not a time says so.
    @Test func optionsForAnotherVerbAndBadBoundsAreRefused() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        _ = try await setup.run("run", "greet", "-p", "name=Ada")
        let cases: [([String], String)] = [
            (["journal", "show", "1", "--since", "1h"], "--since is for 'cmdbus journal list' and 'replay', not 'journal show'"),
            (["journal", "list", "--since", "soon"], "--since takes an age with its unit (90s, 30m, 1h, 7d) or a time (ISO 8601, or seconds since 1970), got 'soon'"),
            (["journal", "show", "1", "--format", "dot"], "--format is for 'cmdbus journal tree', not 'journal show'"),
            (["journal", "replay", "--limit", "1"], "--limit is for 'cmdbus journal list', not 'journal replay'"),
            (["journal", "replay", "--since", "1e400"], "--since takes an entry id, an ISO 8601 time or seconds since 1970, got '1e400'"),
            (["journal", "show", "0"], "'0' is not an entry: their numbers start at 1; 'cmdbus journal list' shows both"),
            (["journal", "show", "x1"], "'x1' is not an entry id (a UUID) or number; 'cmdbus journal list' shows both"),
            (["journal", "list", "--state", "failed,,running"], "--state takes one of pending, running, succeeded, failed, cancelled, timedOut, got ''"),
        ]
        for (arguments, message) in cases {
            let refused = try await setup.run(arguments)
            #expect(refused.status == 64 && refused.stderr.contains(message), "\(arguments): \(refused.stderr)")
        }
        #expect(try await setup.run("journal", "list", "--state", "succeeded", "--limit", "1").status == 0)
        // A journal named on the command line beats $CMDBUS_BUS, as --connect does: it listed
        // the shared bus (here, one that cannot be reached) and ignored the file it was given.
        let local = try await cmdbus(
            ["journal", "list", "--journal", setup.journal], environment: ["CMDBUS_BUS": "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"],
            directory: setup.work.url
        )
        #expect(local.status == 0 && local.stdout.split(separator: "\n").count == 1, "\(local.stdout)\(local.stderr)")
        // A list of states, as the dashboard's filter writes one, is the same as the option repeated.
        _ = try await setup.run("run", "fixture.fail")
        let listed = { (arguments: [String]) async throws -> [Substring] in
            try await setup.run(["journal", "list"] + arguments).stdout.split(separator: "\n")
        }
        let both = try await listed(["--state", "succeeded,failed"])
        let repeated = try await listed(["--state", "succeeded", "--state", "failed"])
        #expect(both.count == 2 && both == repeated, "\(both)")
        #expect(try await listed(["--state", "failed,running"]).count == 1)
    }

    /// `list --since` takes an age or a time: what failed in the last hour is one command (it was
    /// refused as an option of `replay` alone).
    @Test func listSinceAnAgeOrATime() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        _ = try await setup.run("run", "greet", "-p", "name=Ada")
        let lines = { (since: String) async throws -> Int in
            let listed = try await setup.run("journal", "list", "--since", since)
            #expect(listed.status == 0, "\(since): \(listed.stderr)")
            return listed.stdout.split(separator: "\n").count
        }
        let (lastHour, sinceLongAgo, sinceLater) = (try await lines("1h"), try await lines("2000-01-01T00:00:00Z"), try await lines("2999-01-01T00:00:00Z"))
        #expect(lastHour == 1 && sinceLongAgo == 1 && sinceLater == 0)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(try JournalCommand.listedSince("90m", now: now) == now.addingTimeInterval(-5_400))
        #expect(try JournalCommand.listedSince("1800000000.5", now: now) == Date(timeIntervalSince1970: 1_800_000_000.5))
    }

    /// An entry's times are written to the millisecond, so the order of what happened within one
    /// second shows: accepted, then started, then finished (they all read the same second before).
    @Test func anEntrysTimesHaveMilliseconds() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        #expect(try await setup.run("run", "fixture.sleep", "-p", "milliseconds=20").status == 0)
        let entry = try jsonObject(try await setup.run("journal", "show", "1", "--json").stdout)
        let times = try ["createdAt", "startedAt", "finishedAt", "updatedAt"].map { try #require(entry[$0] as? String, "\($0): \(entry)") }
        for time in times { #expect(time.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(time)") }
        #expect(times[0] <= times[1] && times[1] < times[2], "\(times)")
    }

    @Test func undoOfACommandWithoutAnInverseIsRefused() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        _ = try await setup.run("run", "greet", "-p", "name=Ada")
        let undo = try await setup.run("journal", "undo")
        #expect(undo.status == 1)
        #expect(undo.stderr.contains("('greet') cannot be undone: the command declares no inverse"))
    }

    /// `journal undo` without an id takes the latest piece of work, a root: the last subcommand
    /// of a tree is undone with its parent, never alone (it took the tree's last greeting).
    @Test func undoWithoutAnIdTakesTheLatestRoot() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        try setup.plugins.install("libGreetAll.so")
        _ = try await setup.run("run", "counter.add", "-p", "counter=u", "-p", "by=2")
        #expect(try await setup.run("run", "greet-all", #"{"names":["Ada","Grace"]}"#).status == 0)
        let undo = try await setup.run("journal", "undo")
        #expect(undo.status == 1 && undo.stderr.contains("('greet-all') cannot be undone"), "\(undo.stderr)")
        let empty = try Setup()
        defer { empty.work.remove() }
        let failed = try await empty.run("run", "fixture.fail", "-p", "message=broken")
        #expect(failed.status == 1, "\(failed.status): \(failed.stderr)")
        let nothing = try await empty.run("journal", "undo")
        #expect(nothing.status == 1 && nothing.stderr.contains("has no succeeded command left to undo"), "\(nothing.stderr)")
    }

    @Test func undoWithRebuildDropsTheEntryFromReplay() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        _ = try await setup.run("run", "counter.add", "-p", "counter=r", "-p", "by=2")
        _ = try await setup.run("run", "counter.add", "-p", "counter=r", "-p", "by=5")
        let rebuild = try await setup.run("journal", "undo", "--rebuild")
        #expect(rebuild.status == 0 && rebuild.stdout.contains("removed entry"))
        #expect(try await setup.counter("r") == 2)
    }

    @Test func importPlaysOnlyTheEntriesNotSeenYet() async throws {
        let source = try Setup(), target = try Setup()
        defer { source.work.remove(); target.work.remove() }
        for amount in [1, 2, 3] { _ = try await source.run("run", "counter.add", "-p", "counter=i", "-p", "by=\(amount)") }
        _ = try await target.run("run", "counter.add", "-p", "counter=i", "-p", "by=10")
        let first = try await target.run("journal", "import", source.journal, "--json")
        #expect(try jsonObject(first.stdout) as NSDictionary == ["new": 3, "present": 0, "failed": 0] as NSDictionary)
        let second = try await target.run("journal", "import", source.journal, "--json")
        #expect(try jsonObject(second.stdout) as NSDictionary == ["new": 0, "present": 3, "failed": 0] as NSDictionary)
        #expect(try await target.counter("i") == 16)
        let sourceIDs = try await source.entries().compactMap { $0["id"] as? String }
        let targetIDs = try await target.entries().compactMap { $0["id"] as? String }
        #expect(Array(targetIDs.suffix(3)) == sourceIDs)
    }

    /// A tree of work is imported and replayed as it ran: its root runs again and sends its
    /// subcommands anew, which are not also run on their own (each greeting ran twice before).
    @Test func importAndReplayRunASubcommandOnceUnderItsParent() async throws {
        let source = try Setup(), target = try Setup()
        defer { source.work.remove(); target.work.remove() }
        for setup in [source, target] { try setup.plugins.install("libGreetAll.so") }
        let sent = try await source.run("run", "greet-all", #"{"names":["Ada","Grace"]}"#)
        #expect(sent.status == 0, "\(sent.stderr)")
        let rootID = try #require(try await source.entries(command: "greet-all").first?["id"] as? String)

        let imported = try await target.run("journal", "import", source.journal, "--json")
        #expect(try jsonObject(imported.stdout) as NSDictionary == ["new": 1, "present": 0, "failed": 0] as NSDictionary, "\(imported.stderr)")
        let roots = try await target.entries(command: "greet-all"), greetings = try await target.entries(command: "greet")
        #expect(roots.map { $0["id"] as? String } == [rootID])
        #expect(greetings.count == 2 && greetings.allSatisfy { $0["parentId"] as? String == rootID }, "\(greetings)")
        let again = try await target.run("journal", "import", source.journal, "--json")
        #expect(try jsonObject(again.stdout) as NSDictionary == ["new": 0, "present": 1, "failed": 0] as NSDictionary)

        let replayed = try await source.run("journal", "replay", "--json")
        #expect(try jsonObject(replayed.stdout) as NSDictionary == ["replayed": 1, "failed": 0, "sentByParents": 2] as NSDictionary, "\(replayed.stderr)")
        let text = try await source.run("journal", "replay")
        #expect(text.stdout == "replayed 1 entry (and 2 subcommands their parents sent again); 0 failed\n")
    }

    /// A time bound covers the instant it names at the precision it is written in: `--until` given
    /// an entry's own printed `createdAt` replays that entry (it replayed none: the journal keeps
    /// more digits than it prints), and a time to the second covers that second.
    @Test func replayTimeBoundsTakeTheWholeInstantTheyName() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        for name in ["Ada", "Grace"] { #expect(try await setup.run("run", "greet", "-p", "name=\(name)").status == 0) }
        let created = try await setup.entries().compactMap { $0["createdAt"] as? String }
        try #require(created.count == 2)
        func replayed(_ options: String...) async throws -> Int {
            let result = try await setup.run(["journal", "replay", "--json"] + options)
            return try #require(try jsonObject(result.stdout)["replayed"] as? Int, "\(result.stderr)")
        }
        #expect(try await replayed("--until", created[0]) == 1)
        #expect(try await replayed("--since", created[1], "--until", created[1]) == 1)
        let wholeSecond = String(created[1].prefix(19)) + "Z"  // 2026-11-26T11:50:53Z
        #expect(try await replayed("--until", wholeSecond) == 2)
    }

    /// Ctrl-C means cancel: the first SIGINT cancels a one-shot run's (or batch's) commands, which the
    /// journal records `cancelled` (so the next run does not run them again), and it exits 130.
    @Test(.timeLimit(.minutes(2)), arguments: ["run", "batch"])
    func ctrlCCancelsAndRecordsTheCommands(subcommand: String) async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        let input = setup.work.file("sleeps.ndjson")
        try (0..<3).map { _ in #"{"command": "fixture.sleep", "payload": {"milliseconds": 60000}}"# }
            .joined(separator: "\n").write(to: input, atomically: true, encoding: .utf8)
        let process = try launchedChild(
            try TestPaths.product("cmdbus").path,
            (subcommand == "run" ? ["run", "fixture.sleep", "-p", "milliseconds=60000"] : ["batch", input.path])
                + ["--plugins", setup.plugins.path, "--journal", setup.journal, "--no-probe"],
            directory: setup.work.path, standardOutput: .discard, standardError: .discard
        )
        let expected = subcommand == "run" ? 1 : 3
        #expect(await waitUntil(.seconds(30)) {
            ((try? await Self.states(setup)) ?? []).filter { $0 == "running" }.count == expected
        })
        process.send(SIGINT)
        #expect(await process.wait() == .exited(130))
        #expect(try await Self.states(setup) == Array(repeating: "cancelled", count: expected))
    }

    /// The states of the journal's entries, through `cmdbus journal list --json`.
    static func states(_ setup: Setup) async throws -> [String] {
        let listing = await stdoutOf(try TestPaths.product("cmdbus"), ["journal", "list", "--json", "--journal", setup.journal]) ?? ""
        let entries = (try? JSONSerialization.jsonObject(with: Data(listing.utf8)) as? [[String: Any]]) ?? []
        return entries.compactMap { $0["state"] as? String }
    }

    @Test func deadLettersAreListedAndRetried() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        let timedOut = try await setup.run("run", "fixture.sleep", "-p", "milliseconds=300", "--timeout", "0.05")
        #expect(timedOut.status == 75)
        _ = try await setup.run("run", "fixture.fail", "-p", "message=broken")
        let list = try await cmdbus(["journal", "list", "--state", "timedOut", "--state", "failed", "--journal", setup.journal], directory: setup.work.url)
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0].contains("timedOut  fixture.sleep") && lines[1].contains("failed  fixture.fail"))
        #expect(lines[1].contains("command 'fixture.fail' failed in plugin 'fixture'"))
        let id = String(lines[0].split(separator: " ", omittingEmptySubsequences: true)[1])
        // On a loaded machine the 50 ms deadline can pass before the handler starts (0 attempts),
        // so the retry is checked against the count before it, not against a fixed number.
        let before = try jsonObject(try await cmdbus(["journal", "show", id, "--journal", setup.journal], directory: setup.work.url).stdout)
        let attemptsBefore = try #require(before["attempts"] as? Int)
        let retry = try await setup.run("journal", "retry", id)
        #expect(retry.status == 0, "\(retry.stderr)")
        #expect(retry.stdout == "{\"sawCancellation\":false}\n")
        let show = try jsonObject(try await cmdbus(["journal", "show", id, "--journal", setup.journal], directory: setup.work.url).stdout)
        #expect(show["state"] as? String == "succeeded")
        #expect((show["attempts"] as? Int ?? 0) == attemptsBefore + 1, "the retry ran the handler once more, under the same id")
        let badRetry = try await setup.run("journal", "retry", id)
        #expect(badRetry.status == 64 && badRetry.stderr.contains("is succeeded; only failed"))
    }

    @Test func treeShowsTheSubcommandsAsTextMermaidAndDot() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        try setup.plugins.install("libGreetAll.so")
        let sent = try await setup.run("run", "greet-all", "-p", #"names=["Ada","Grace"]"#)
        #expect(sent.status == 0, "\(sent.stderr)")
        // By number (the first column of journal list) as well as by id.
        let text = try await setup.run("journal", "tree", "1")
        let lines = text.stdout.split(separator: "\n")
        #expect(lines.count == 3, "\(text.stdout)\(text.stderr)")
        #expect(lines.first?.hasPrefix("greet-all  succeeded  ") == true)
        #expect(lines.dropFirst().first?.hasPrefix("├─ greet  succeeded  ") == true && lines.last?.hasPrefix("└─ greet  succeeded  ") == true)
        #expect(lines.last?.contains(" at +") == true)

        let mermaid = try await setup.run("journal", "tree", "1", "--format", "mermaid")
        #expect(mermaid.stdout.hasPrefix("flowchart TD\n") && mermaid.stdout.contains("n0 --> n1") && mermaid.stdout.contains("n0 --> n2"))

        let dot = try await setup.run("journal", "tree", "1", "--format", "dot")
        #expect(dot.stdout.hasPrefix("digraph command_tree {") && dot.stdout.contains("n0 -> n2;"))
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/dot"), "this test renders with Graphviz: scripts/test.sh installs Debian's graphviz")
        let source = setup.work.file("tree.dot"), image = DashboardTests.artifacts.appendingPathComponent("journal-tree.png")
        try dot.stdout.write(to: source, atomically: true, encoding: .utf8)
        let rendered = try await runProcess("/usr/bin/dot", ["-Tpng", source.path, "-o", image.path])
        #expect(rendered.status == 0, "dot: \(rendered.stderr)")
        let png = try Data(contentsOf: image)
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 1_000)

        let bad = try await setup.run("journal", "tree", "1", "--format", "svg")
        #expect(bad.status == 64 && bad.stderr.contains("--format takes text, mermaid or dot"))
        let missing = try await setup.run("journal", "tree", "99")
        #expect(missing.status != 0 && missing.stderr.contains("no entry number 99"))
    }

    /// Starts `cmdbus run fixture.sleep` and kills it with SIGKILL once the journal has it running.
    /// Without the probe: this is about the journal, and a probe child on a loaded machine is slow.
    static func killedMidCommand(_ setup: Setup, milliseconds: Int) async throws -> String {
        let errors = setup.work.file("killed.stderr").path
        let process = try launchedChild(
            try TestPaths.product("cmdbus").path,
            ["run", "fixture.sleep", "-p", "milliseconds=\(milliseconds)", "--journal", setup.journal, "--plugins", setup.plugins.path, "--no-probe"],
            directory: setup.work.path, standardOutput: .discard, standardError: .file(errors)
        )
        let said: @Sendable () -> String = { (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "" }
        // Watch and kill from a thread of its own: on a loaded machine the cooperative pool the test
        // runs on can be busy for longer than the command runs (a full run missed 20 s of it).
        let journal = setup.journal
        let seenRunning = await DetachedThread.value { () -> Bool in
            let deadline = ContinuousClock.now + .seconds(120)
            while ContinuousClock.now < deadline && process.isRunning {
                if Self.runningCount(journal) > 0 {
                    process.send(SIGKILL)
                    return true
                }
                usleep(2_000)
            }
            return false
        }
        #expect(seenRunning, "never seen running; ended \(String(describing: process.ending)), said: \(said())")
        #expect(await process.wait() == .signaled(SIGKILL), "said: \(said())")
        let listing = try await setup.run("journal", "list", "--state", "running")
        return try #require(listing.stdout.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.map(String.init))
    }

    /// Commands the journal file says are running, read directly (a process per look is slow on a
    /// loaded machine); 0 if the file cannot be read yet.
    static func runningCount(_ journal: String) -> Int64 {
        guard let database = try? SQLiteDatabase(path: journal, create: false, readOnly: true) else { return 0 }
        defer { database.close() }
        return (try? database.integer("SELECT count(*) FROM entries WHERE state = 'running'")) ?? 0
    }

    @Test func aOneShotRunReportsWhatADeadProcessLeftAndRecoverRunsIt() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        let orphan = try await Self.killedMidCommand(setup, milliseconds: 8_000)
        let other = try await setup.run("run", "greet", "-p", "name=Ada")
        #expect(other.status == 0 && other.stdout.contains("Hello, Ada!"))
        #expect(other.stderr.contains("1 command a process that died left unfinished"), "\(other.stderr)")
        #expect(other.stderr.contains("'fixture.sleep' \(orphan)") && other.stderr.contains("'cmdbus journal recover' runs them"))
        #expect(try await Self.states(setup).filter { $0 == "running" }.count == 1, "the one-shot run left it alone")

        let recovered = try await setup.run("journal", "recover")
        #expect(recovered.status == 0 && recovered.stdout.contains("\(orphan)  succeeded  fixture.sleep"), "\(recovered.stdout)\(recovered.stderr)")
        let again = try await setup.run("journal", "recover")
        #expect(again.status == 0 && again.stdout.contains("nothing to recover"))
    }

    @Test func aTimeoutEndsTheWholeTreeAndSaysSoForAChildThatIgnoredIt() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        // A second for the child to start first: with 0.3 s, a loaded machine (a CI rehearsal
        // running the server suites beside it) timed the parent out before its child ran.
        let run = try await setup.run("run", "fixture.sleep-via", "-p", "milliseconds=4000", "-p", "stubborn=true", "--timeout", "1")
        #expect(run.status == 75, "\(run.stderr)")
        let entries = try await setup.entries()
        #expect(entries.count == 2)
        let parent = try #require(entries.first { $0["command"] as? String == "fixture.sleep-via" })
        let child = try #require(entries.first { $0["command"] as? String == "fixture.sleep" })
        #expect(parent["state"] as? String == "timedOut")
        #expect(child["state"] as? String == "cancelled", "a child still running at exit is not left running")
        let message = (child["error"] as? [String: Any])?["message"] as? String ?? ""
        #expect(message.contains("still running when cmdbus exited") && !message.contains("superseded"), "\(message) (started: \(child["startedAt"] ?? "never"))")
        let next = try await setup.run("run", "greet", "-p", "name=Ada")
        #expect(next.status == 0 && !next.stderr.contains("unfinished"), "\(next.stderr)")
    }

    @Test func discardDropsUnfinishedWorkOfADeadProcessButNotLiveWork() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        let orphan = try await Self.killedMidCommand(setup, milliseconds: 60_000)
        let dropped = try await setup.run("journal", "discard", orphan)
        #expect(dropped.status == 0 && dropped.stdout.contains("(was running; now cancelled)"), "\(dropped.stderr)")
        let shown = try jsonObject(try await setup.run("journal", "show", orphan).stdout)
        #expect(shown["state"] as? String == "cancelled" && shown["discardedAt"] is String)
        let quiet = try await setup.run("run", "greet", "-p", "name=Ada")
        #expect(!quiet.stderr.contains("left unfinished"), "\(quiet.stderr)")
    }

    @Test func discardTakesADeadLetterOffTheListAndKeepsTheEntry() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        _ = try await setup.run("run", "fixture.fail", "-p", "message=broken")
        _ = try await setup.run("run", "greet", "-p", "name=Ada")
        let refused = try await setup.run("journal", "discard", "2")
        #expect(refused.status != 0 && refused.stderr.contains("only failed, cancelled or timed-out entries"))
        let discarded = try await setup.run("journal", "discard", "1")
        #expect(discarded.status == 0 && discarded.stdout.contains("stays in the journal"), "\(discarded.stderr)")
        let shown = try jsonObject(try await setup.run("journal", "show", "1").stdout)
        #expect(shown["state"] as? String == "failed" && shown["discardedAt"] is String)
    }

    @Test func batchReportsEveryLineAndSurvivesBadOnes() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        let input = setup.work.file("mixed.ndjson")
        try """
            {"command":"greet","payload":{"name":"Ada"}}
            not json

            {"command":"nope","payload":{}}
            {"command":"greet","payload":{"name":""}}
            {"command":"greet","payload":{"name":"Lin"}}
            """.write(to: input, atomically: true, encoding: .utf8)
        // A line that is not UTF-8 (a byte 0xFF) is refused, where it ran as "Ad\u{FFFD}".
        let handle = try FileHandle(forWritingTo: input)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("\n{\"command\":\"greet\",\"payload\":{\"name\":\"Ad".utf8) + Data([0xFF]) + Data("\"}}\n".utf8))
        // A name no plugin can declare is refused before the journal (it was journaled as failed).
        try handle.write(contentsOf: Data("{\"command\":\"\",\"payload\":{}}\n".utf8))
        try handle.close()
        let result = try await setup.run("batch", input.path)
        #expect(result.status == 1)
        let lines = try result.stdout.split(separator: "\n").map { try jsonObject(String($0)) }
        #expect(lines.count == 7)
        let byLine = Dictionary(uniqueKeysWithValues: lines.map { ($0["line"] as? Int ?? 0, $0) })
        #expect(byLine[1]?["state"] as? String == "succeeded")
        #expect((byLine[1]?["result"] as? [String: Any])?["greeting"] as? String == "Hello, Ada!")
        #expect((byLine[2]?["error"] as? [String: Any])?["code"] as? String == "decodingFailed")
        let notJSON = (byLine[2]?["error"] as? [String: Any])?["message"] as? String
        #expect(notJSON?.hasSuffix(": it is not JSON (unexpected 'n' at column 1)") == true, "\(notJSON ?? "")")
        let notUTF8 = (byLine[7]?["error"] as? [String: Any])?["message"] as? String
        #expect(notUTF8?.hasSuffix(": it is not JSON (byte 0xFF at column 41 is not UTF-8)") == true, "\(notUTF8 ?? "")")
        #expect((byLine[4]?["error"] as? [String: Any])?["code"] as? String == "noHandler")
        #expect((byLine[5]?["error"] as? [String: Any])?["code"] as? String == "noHandler")
        #expect(byLine[6]?["state"] as? String == "succeeded")
        let emptyName = (byLine[8]?["error"] as? [String: Any])?["message"] as? String
        #expect(emptyName == "line 8: its \"command\" is not a command name: it is empty", "\(emptyName ?? "")")
        let journaled = try await setup.run("journal", "list").stdout.split(separator: "\n")
        #expect(journaled.count == 4, "only the lines sent are journaled: \(journaled)")
        #expect(result.stderr.contains("5 of the batch's commands did not succeed"))
    }

    @Test func noJournalMeansNoFile() async throws {
        let setup = try Setup()
        defer { setup.work.remove() }
        let run = try await cmdbus(["run", "greet", "-p", "name=Ada", "--no-journal", "--plugins", setup.plugins.path], directory: setup.work.url)
        #expect(run.status == 0)
        #expect(!FileManager.default.fileExists(atPath: setup.work.file(".cmdbus").path))
        let defaulted = try await cmdbus(["run", "greet", "-p", "name=Ada", "--plugins", setup.plugins.path], directory: setup.work.url)
        #expect(defaulted.status == 0)
        #expect(FileManager.default.fileExists(atPath: setup.work.file(".cmdbus/journal.sqlite").path))
    }
}
