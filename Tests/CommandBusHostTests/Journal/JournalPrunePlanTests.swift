@testable import CommandBusSQLite
import Foundation
import Testing

/// A dry run of `cmdbus journal prune` counts what would go through the indexes, as the prune
/// itself removes it.
struct JournalPrunePlanTests {
    /// The count of a batch's trees reads the batch's roots and, through the correlation index,
    /// their subcommands: no statement of it reads the whole table. It did, once a batch of
    /// 1,000 roots: a dry run over 612,000 entries took 92 s, the prune it previewed 5.
    @Test func aDryRunCountsThroughTheCorrelationIndex() throws {
        let work = try TemporaryDirectory("cmdbus-prune-plan")
        defer { work.remove() }
        let path = work.file("journal.sqlite").path
        _ = try SQLiteJournal(path: path)
        let database = try SQLiteDatabase(path: path, create: false)
        defer { database.close() }
        try database.execute("CREATE TEMP TABLE prune_roots (seq INTEGER PRIMARY KEY, id TEXT NOT NULL)")
        let steps = try database.planSteps(of: SQLiteJournalStatements.prunedEntriesCount)
        #expect(steps.contains { $0.contains("USING INDEX commands_correlation") }, "\(steps)")
        #expect(!steps.contains { $0.hasPrefix("SCAN") && !$0.hasPrefix("SCAN prune_roots") && !$0.hasPrefix("SCAN CONSTANT ROW") }, "a read of every entry: \(steps)")
    }
}
