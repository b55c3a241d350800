import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Removing old entries (`cmdbus journal prune`): whole trees of work, each once its root and
/// every subcommand under it ended before a time, a batch of trees per transaction, so a
/// server writing to the same file waits for one batch at most.
///
/// The tree of the newest entry always stays. SQLite numbers a new row one past the largest
/// there is, so removing the newest would give its number, and those below it, to the next
/// commands: one number would name two entries over time, and the next commands would sit at or
/// below the sweep's mark (``SQLiteJournalSchema/sweep``), where recovery does not look for
/// new work; a command a killed process left unfinished there was never run again.
///
/// Each prune that removes entries leaves its cutoff behind (``markPruned(before:)``), so that
/// a `.deferred` journal's log, applied after a crash, does not put them back.
extension SQLiteJournalStatements {
    /// The subcommands of the trees in `prune_roots`, as a condition on `commands` (or `entries`).
    /// It says `correlation_id <> id`, as the correlation index's `WHERE` does, so SQLite reads
    /// them through that partial index; a condition without it reads the whole table. The dry
    /// run's count and the prune's deletes share it, so the count is of the rows that would go.
    private static let subcommandsOfBatch = "correlation_id IN (SELECT id FROM prune_roots) AND correlation_id <> id"

    /// Takes the newest entry's tree out of the batch: its root, or the root of the subcommand it is.
    private static let keepNewestTree = """
        DELETE FROM prune_roots WHERE id = (
            SELECT CASE WHEN parent_id IS NULL THEN id ELSE correlation_id END FROM commands ORDER BY seq DESC LIMIT 1);
        """

    /// How many entries the trees in `prune_roots` hold: the roots, and their subcommands through
    /// the correlation index (``subcommandsOfBatch``). Counted as one set, by `correlation_id IN (…)`
    /// alone, the roots kept the index out: every batch of a dry run read the whole table, and a
    /// dry run over 612,000 entries took 92 s, where the prune took 5.
    static let prunedEntriesCount = """
        SELECT (SELECT count(*) FROM prune_roots) + (SELECT count(*) FROM commands WHERE \(subcommandsOfBatch))
        """

    /// Removes up to `limit` trees, oldest first, past `after` (a root's entry number), whose
    /// root ended in one of `rootStates` (any final state if empty) and whose every entry ended
    /// before `cutoff`. Unfinished work is never removed.
    /// With `dryRun`, counts what would go and rolls the batch back.
    /// - Returns: The entries removed, and the last root looked at (where the next batch starts),
    ///   or `nil` once no root is left to look at.
    func prune(
        endedBefore cutoff: Date, rootStates: Set<CommandState>, after: Int64, limit: Int, dryRun: Bool = false
    ) throws(CommandBusError) -> (removed: Int, lastRoot: Int64?) {
        let finals = rootStates.isEmpty ? CommandState.allCases.filter(\.isTerminal) : Array(rootStates)
        let states = finals.map { "'\($0.rawValue)'" }.joined(separator: ", ")  // the enum's own names: no quoting needed
        try database.execute("CREATE TEMP TABLE IF NOT EXISTS prune_roots (seq INTEGER PRIMARY KEY, id TEXT NOT NULL)")
        try begin()
        do throws(CommandBusError) {
            try database.execute("DELETE FROM prune_roots")
            // Roots in entry order from `after`: over all batches the scan reads each row once.
            let roots = try database.prepare("""
                INSERT INTO prune_roots (seq, id) SELECT seq, id FROM entries
                WHERE seq > ?1 AND parent_id IS NULL AND state IN (\(states)) AND finished_at < ?2
                ORDER BY seq LIMIT ?3
                """)
            roots.bind(1, after)
            roots.bind(2, cutoff.timeIntervalSince1970)
            roots.bind(3, Int64(limit))
            _ = try roots.step()
            let last = try database.integer("SELECT coalesce(max(seq), 0) FROM prune_roots")
            guard last > 0 else {
                try commit()
                return (0, nil)
            }
            // A tree goes only whole: not while a subcommand is unfinished or ended since.
            let keep = try database.prepare("""
                DELETE FROM prune_roots WHERE id IN (
                    SELECT correlation_id FROM entries WHERE \(Self.subcommandsOfBatch)
                        AND (state IN ('pending', 'running') OR finished_at IS NULL OR finished_at >= ?1))
                """)
            keep.bind(1, cutoff.timeIntervalSince1970)
            _ = try keep.step()
            try database.execute(Self.keepNewestTree)
            if dryRun {
                let count = try database.integer(Self.prunedEntriesCount)
                rollback()
                return (Int(count), last)
            }
            // Subcommands through the correlation index (whose rows have `correlation_id <> id`), then the roots.
            try database.execute("""
                DELETE FROM endings WHERE seq IN (
                    SELECT seq FROM commands WHERE \(Self.subcommandsOfBatch));
                DELETE FROM commands WHERE \(Self.subcommandsOfBatch);
                """)
            let children = database.changes
            try database.execute("""
                DELETE FROM endings WHERE seq IN (SELECT seq FROM prune_roots);
                DELETE FROM unended WHERE seq IN (SELECT seq FROM prune_roots);
                DELETE FROM commands WHERE seq IN (SELECT seq FROM prune_roots);
                """)
            let removed = children + database.changes
            if removed > 0 { try markPruned(before: cutoff) }
            try commit()
            return (removed, last)
        } catch {
            rollback()
            throw error
        }
    }
}
