@testable import CommandBusSQLite
import CommandBus
import CommandBusSupport
import Foundation
import Testing

/// A prune of a journal whose `.deferred` server keeps a log (``JournalLog``) stays a prune
/// after that server is killed: applying the log puts back what a crash kept from SQLite, not
/// what the prune removed.
struct JournalPruneUnderLogTests {
    /// Found by hand: twenty commands through a `--durability deferred` server, a prune of all
    /// but the newest, the server killed with `kill -9`; the next `journal list` showed all
    /// twenty again, the pruned ones under new entry numbers past the kept one.
    @Test(.timeLimit(.minutes(3)))
    func aPruneIsNotUndoneWhenTheDeferredServerIsKilled() async throws {
        let work = try TemporaryDirectory("cmdbus-prune-log")
        try work.subdirectory("plugins").install("libGreeter.so", "libCounter.so", "libFixturePlugin.so", "libGreetAll.so")
        let server = try await ServerTests.Server(work: work, arguments: ["--durability", "deferred"])
        defer { server.work.remove() }
        let connect = "--connect=\(server.socket)"
        #expect(try await cmdbus(["run", "greet-all", "-p", #"names=["Ada","Grace"]"#, connect]).status == 0)
        for name in ["Alan", "Barbara", "Edsger"] {
            #expect(try await cmdbus(["run", "greet", "-p", "name=\(name)", connect]).status == 0)
        }
        let posted = try await cmdbus(["run", "fixture.sleep", "-p", "milliseconds=600000", "--no-wait", connect])
        let sleeper = posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(posted.status == 0 && CommandID.parse(sleeper) != nil, "\(posted.stdout)\(posted.stderr)")

        let pruned = try await cmdbus(["journal", "prune", "--older-than", "0", "--journal", server.journal], directory: server.work.url)
        #expect(pruned.stdout.hasPrefix("removed 6 entries"), "\(pruned.stdout)\(pruned.stderr)")
        server.process.send(SIGKILL)
        #expect(await server.process.wait() == .signaled(SIGKILL))

        // Opening the journal applies the dead server's log: the unfinished command stays, as
        // recovery needs it, and nothing pruned comes back.
        let listed = try await cmdbus(["journal", "list", "--json", "--journal", server.journal], directory: server.work.url)
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]], "\(listed.stderr)")
        #expect(entries.map { $0["id"] as? String } == [sleeper], "\(entries.map { $0["command"] ?? "?" })")
        #expect(["pending", "running"].contains(entries.first?["state"] as? String), "unfinished, for recovery")
        let database = try SQLiteDatabase(path: server.journal, create: false, readOnly: true)
        defer { database.close() }
        #expect(try database.integer("SELECT count(*) FROM prune_mark") == 0, "the applied log's mark is cleared")
    }

    /// Which commands of a log, missing from SQLite, a prune removed: those that ended before
    /// the mark, with their tree's root gone too.
    @Test func theLogsPrunedCommandsAreThoseThatEndedBeforeTheMarkWithTheirRoot() throws {
        let mark = Date()
        let before = mark.addingTimeInterval(-60), after = mark.addingTimeInterval(1)
        let root = CommandEnvelope(commandName: "root"), keptRoot = CommandEnvelope(commandName: "kept")
        let pruned = AcceptedCommand(root, payload: Data()), child = AcceptedCommand(CommandEnvelope(commandName: "child", parent: root), payload: Data())
        let childOfKept = AcceptedCommand(CommandEnvelope(commandName: "child", parent: keptRoot), payload: Data())
        let oldRoot = CommandEnvelope(commandName: "old")
        let childOfOld = AcceptedCommand(CommandEnvelope(commandName: "child", parent: oldRoot), payload: Data())
        let late = AcceptedCommand(CommandEnvelope(commandName: "late"), payload: Data())
        let retried = AcceptedCommand(CommandEnvelope(commandName: "retried"), payload: Data())
        let unended = AcceptedCommand(CommandEnvelope(commandName: "unended"), payload: Data())
        func ended(_ command: AcceptedCommand, at: Date) -> JournalLogEntry {
            JournalLogEntry(write: .update(JournalUpdate(id: command.id, state: .succeeded, attempts: 1, at: at)), owner: "")
        }
        func accepted(_ command: AcceptedCommand) -> JournalLogEntry { JournalLogEntry(write: .accept(command), owner: "1:1") }
        let entries = [
            accepted(pruned), accepted(child), ended(child, at: before), ended(pruned, at: before),
            accepted(childOfKept), ended(childOfKept, at: before), accepted(childOfOld), ended(childOfOld, at: before),
            accepted(late), ended(late, at: after),
            accepted(retried), ended(retried, at: before), accepted(retried),
            accepted(unended),
        ]
        // The journal holds the kept root; the old root, whose records the log no longer has, went.
        let inJournal: (UUID) throws(CommandBusError) -> Bool = { $0 == keptRoot.id }
        var decisions = PrunedLogCommands(mark: mark.timeIntervalSince1970, entries: entries)
        for command in [pruned, child, childOfOld] { #expect(try decisions.wasPruned(command, isInJournal: inJournal), "\(command.id)") }
        for command in [childOfKept, late, retried, unended] { #expect(try !decisions.wasPruned(command, isInJournal: inJournal), "\(command.id)") }
        // Without a mark, no prune ran since the log began: nothing is taken for pruned.
        var unmarked = PrunedLogCommands(mark: nil, entries: entries)
        #expect(try !unmarked.wasPruned(pruned, isInJournal: inJournal))
    }
}
