import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What keeps a prune from being undone by a `.deferred` journal's log (``JournalLog``).
///
/// The log holds the last writes of the process that keeps it (up to about 2 MiB), and the
/// next process to open the journal applies them, putting back any command whose row is
/// missing: one a crash kept out of SQLite. A prune removes rows too, and a command it removed
/// whose records were still in the log came back, ended, under a new entry number, once that
/// process was killed. So each prune leaves its cutoff in `prune_mark` (one row, the latest
/// cutoff; the table is made by the first prune, and a journal without it reads as one no prune
/// has touched), and applying the log skips a missing command that the log says ended before
/// it: the prune removed it, or would have, had SQLite held it yet. The opening that applied
/// the log clears the mark, as the log starts empty.
extension SQLiteJournalStatements {
    /// Makes the mark's table if there is none.
    private static let markTable = "CREATE TABLE IF NOT EXISTS prune_mark (before REAL NOT NULL)"

    /// Leaves `cutoff` as the mark, if it is later than the one there: in the prune's transaction.
    func markPruned(before cutoff: Date) throws(CommandBusError) {
        try database.execute(Self.markTable)
        let older = try database.prepare("DELETE FROM prune_mark WHERE before < ?1")
        older.bind(1, cutoff.timeIntervalSince1970)
        _ = try older.step()
        let insert = try database.prepare("INSERT INTO prune_mark (before) SELECT ?1 WHERE NOT EXISTS (SELECT 1 FROM prune_mark)")
        insert.bind(1, cutoff.timeIntervalSince1970)
        _ = try insert.step()
    }

    /// The latest cutoff a prune left, in seconds since 1970; `nil` if no prune left one.
    func pruneMark() throws(CommandBusError) -> Double? {
        guard try hasPruneMarkTable() else { return nil }
        let statement = try database.prepare("SELECT max(before) FROM prune_mark")
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return statement.double(0)
    }

    /// Forgets the mark: the log it guarded against has been applied and emptied.
    func clearPruneMark() throws(CommandBusError) {
        guard try hasPruneMarkTable() else { return }
        try database.execute("DELETE FROM prune_mark")
    }

    private func hasPruneMarkTable() throws(CommandBusError) -> Bool {
        try database.integer("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'prune_mark'") > 0
    }
}

/// Decides, while a log is applied, which of its commands missing from SQLite a prune removed
/// (``SQLiteJournalStatements/markPruned(before:)``): those the log says ended before the mark,
/// whose tree's root went too. A subcommand whose root is still in the journal is put back, as
/// a prune takes a tree only whole.
struct PrunedLogCommands {
    private let mark: Double?
    /// When each command of the log last ended, if no accept of it follows.
    private var endedAt: [UUID: Double] = [:]
    /// The commands the log accepts.
    private var accepted: Set<UUID> = []
    /// The commands found pruned so far.
    private var pruned: Set<UUID> = []

    init(mark: Double?, entries: [JournalLogEntry]) {
        self.mark = mark
        guard mark != nil else { return }
        for entry in entries {
            switch entry.write {
            case .accept(let command):
                accepted.insert(command.id)
                endedAt[command.id] = nil
            case .update(let update) where update.state.isTerminal:
                endedAt[update.id] = update.at.timeIntervalSince1970
            default:
                continue
            }
        }
    }

    /// Whether `command`, which the journal does not hold, was pruned; `isInJournal` says
    /// whether the journal holds a command (its tree's root).
    mutating func wasPruned(
        _ command: AcceptedCommand, isInJournal: (UUID) throws(CommandBusError) -> Bool
    ) throws(CommandBusError) -> Bool {
        guard let mark, let ended = endedAt[command.id], ended < mark else { return false }
        let root = command.correlationID
        let rootWent: Bool
        if root == command.id || pruned.contains(root) {
            rootWent = true
        } else if accepted.contains(root) {
            // The log put the root back, or found it in the journal: the tree stays.
            rootWent = false
        } else {
            rootWent = try !isInJournal(root)
        }
        if rootWent { pruned.insert(command.id) }
        return rootWent
    }
}
