import CommandBus
import CommandBusSQLite
import Foundation
import Testing

/// A tree is found by its root's id and its subcommands' correlation id: `commands_correlation`
/// holds only the commands whose correlation id is not their own (schema version 5).
struct JournalTreeQueryTests {
    /// Two trees, a command that joined the first tree without a parent, and a lone command.
    /// The migration suite journals them in a version 4 file.
    struct Forest {
        let root: CommandEnvelope, child: CommandEnvelope, grandchild: CommandEnvelope, joined: CommandEnvelope
        let otherRoot: CommandEnvelope, otherChild: CommandEnvelope, lone: CommandEnvelope

        init() {
            root = CommandEnvelope(commandName: "order.place")
            otherRoot = CommandEnvelope(commandName: "order.place")
            child = CommandEnvelope(commandName: "stock.reserve", parent: root)
            otherChild = CommandEnvelope(commandName: "stock.reserve", parent: otherRoot)
            grandchild = CommandEnvelope(commandName: "stock.count", parent: child)
            var joined = CommandEnvelope(commandName: "audit")
            joined.correlationID = root.id
            self.joined = joined
            lone = CommandEnvelope(commandName: "ping")
        }

        /// In the order they are journaled: the trees interleaved.
        var all: [CommandEnvelope] { [root, otherRoot, child, otherChild, lone, grandchild, joined] }
    }

    @Test func aTreeQueryFindsTheRootAndEveryCommandOfItsTreeAndNothingElse() async throws {
        let work = try TemporaryDirectory("cmdbus-tree")
        defer { work.remove() }
        let journal = try SQLiteJournal(path: work.file("journal.sqlite").path)
        let forest = Forest()
        for envelope in forest.all { try await journal.accept(envelope, payload: Data("{}".utf8)) }

        let tree = try await journal.records(JournalQuery(correlationID: forest.root.id))
        #expect(tree.map(\.envelope.id) == [forest.root, forest.child, forest.grandchild, forest.joined].map(\.id))
        let newest = try await journal.records(JournalQuery(limit: 2, correlationID: forest.root.id, newestFirst: true))
        #expect(newest.map(\.envelope.id) == [forest.joined.id, forest.grandchild.id])
        let other = try await journal.records(JournalQuery(commandName: "stock.reserve", correlationID: forest.otherRoot.id))
        #expect(other.map(\.envelope.id) == [forest.otherChild.id])
        #expect(try await journal.records(JournalQuery(correlationID: forest.lone.id)).map(\.envelope.id) == [forest.lone.id])
        // A subcommand's own id names no tree: nothing has it as its correlation id.
        #expect(try await journal.records(JournalQuery(correlationID: forest.child.id)).isEmpty)
    }

    /// SQLite uses a partial index only for a condition that says its `WHERE`: a plain
    /// `correlation_id = ?` would read every command.
    @Test func aTreeQueryReadsTheTwoIndexesNotTheWholeTable() throws {
        let work = try TemporaryDirectory("cmdbus-tree")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        _ = try SQLiteJournal(path: path)
        let database = try SQLiteDatabase(path: path, create: false)
        defer { database.close() }
        let steps = try database.planSteps(of: "SELECT seq FROM entries WHERE \(SQLiteJournalStatements.treeCondition) ORDER BY seq")
        #expect(steps.contains { $0.contains("USING INDEX sqlite_autoindex_commands_1 (id=?)") }, "\(steps)")
        #expect(steps.contains { $0.contains("USING INDEX commands_correlation (correlation_id=?)") }, "\(steps)")
        #expect(!steps.contains { $0.hasPrefix("SCAN c") }, "\(steps)")
    }
}
