import CommandBusSupport
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A ``Journal`` in an SQLite file, in WAL mode, with group commit.
///
/// A write that finds the journal idle is committed at once; writes that arrive during a commit
/// queue up and are committed together, one transaction and one sync for many commands
/// (`.batched`, `.deferred`), or each in its own transaction (`.synced`). Several processes can share one file:
/// SQLite's locks and a busy timeout serialize them, and recovery leaves alone the commands of
/// processes still running. A file that is not a CommandBus journal, or is damaged, is refused
/// and never written to.
/// ```swift
/// let journal = try SQLiteJournal(path: ".cmdbus/journal.sqlite")
/// let bus = CommandBus(configuration: .init(journal: journal))
/// ```
public final class SQLiteJournal: Journal, @unchecked Sendable {
    /// How writes reach the disk.
    public enum Durability: Sendable, Hashable {
        /// Each write is its own transaction, synced before it returns.
        case synced
        /// Group commit: writes that arrive while a commit is under way (or within `maxDelay`
        /// of the first) share the next transaction and its one sync. With `.zero`, a write waits
        /// at most for the commit before it.
        case batched(maxDelay: Duration)
        /// One sync per command instead of two: a command's write-ahead is written (in the
        /// operating system's hands, so it survives the process dying) before the command is
        /// scheduled, and made durable by the sync of its ending, before anyone hears of that. A
        /// power cut or kernel crash while a command runs can lose its entry; its caller never got
        /// an answer. The journal keeps a log beside the file for this (`PATH-log.0` and
        /// `-log.1`): its syncs are of a few hundred bytes, and SQLite commits the same writes a
        /// few milliseconds later without one.
        case deferred
    }

    /// The file.
    public let path: String
    /// How writes reach the disk.
    public let durability: Durability

    private let database: SQLiteDatabase
    private let writer: JournalWriter
    /// The file the path led to when the journal opened it: its device and inode say which
    /// (``fileProblem``).
    let file: FileSystem.Status?
    private let owner = ProcessIdentity.current

    /// The schema version this code writes (``SQLiteJournalSchema``).
    package static let schemaVersion = SQLiteJournalSchema.version
    /// `PRAGMA application_id` of a CommandBus journal: "CMDB".
    package static let applicationID: Int64 = 0x434D_4442

    /// Opens the journal at `path`, creating it (and its directory) if there is none.
    /// - Throws: `journalFailed` naming the file and the cause; a damaged or foreign file is left untouched.
    /// - Parameters:
    ///   - create: Create the file if there is none; otherwise a missing file is an error.
    ///   - readOnly: Open an existing journal only to read it (to import from it); it is never written.
    public convenience init(
        path: String, durability: Durability = .batched(maxDelay: .zero), create: Bool = true, readOnly: Bool = false
    ) throws(CommandBusError) {
        try self.init(path: path, durability: durability, create: create, readOnly: readOnly, unwaitedWriteTimer: nil)
    }

    /// Opens the journal with the timers for writes nobody waits for armed by `unwaitedWriteTimer` (tests fire them by hand).
    package init(
        path: String, durability: Durability, create: Bool, readOnly: Bool, unwaitedWriteTimer: UnwaitedWriteTimer?
    ) throws(CommandBusError) {
        self.path = path
        self.durability = durability
        let exists = try JournalFileCheck.validate(path)
        if !exists {
            guard create, !readOnly else {
                throw .journalFailed(path, "does not exist (or is empty); check the path: a journal is made by the first command run with it (cmdbus run, batch or serve)")
            }
            try Self.makeParentDirectory(of: path)
        }
        database = try SQLiteDatabase(path: path, create: !exists, readOnly: readOnly)
        file = FileSystem.status(of: path)
        try database.execute("PRAGMA busy_timeout = 10000")
        try Self.prepareSchema(database, path: path, mayCreate: !readOnly)
        if !readOnly {
            try database.execute("PRAGMA journal_mode = WAL")
            try Self.sweepIfBehind(database)
            try database.execute("PRAGMA synchronous = FULL")
        }
        let statements = try SQLiteJournalStatements(database, readOnly: readOnly)
        let log = readOnly ? nil : try Self.openLog(path: path, statements: statements, keep: durability == .deferred)
        writer = JournalWriter(statements: statements, durability: durability, owner: owner.text, log: log, startLater: unwaitedWriteTimer)
    }

    /// Applies whatever the journal's log (``JournalLog``) holds, and returns the log, emptied and
    /// locked, if `keep` (a `.deferred` journal); else removes it. `nil` if there is none to apply
    /// and none to keep, or another live process keeps it (it applies what it holds itself).
    private static func openLog(path: String, statements: SQLiteJournalStatements, keep: Bool) throws(CommandBusError) -> JournalLog? {
        let exists = JournalLog.paths(journal: path).contains { FileSystem.kind(of: $0) != .missing }
        guard keep || exists, let log = try JournalLog(journal: path) else { return nil }
        let entries = log.storedEntries()
        if !entries.isEmpty { try statements.applyLogged(entries) }
        guard keep else {
            log.remove()
            try statements.clearPruneMark()
            return nil
        }
        try log.reset()
        try statements.clearPruneMark()
        return log
    }

    private static func makeParentDirectory(of path: String) throws(CommandBusError) {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let directory = String(path[..<slash])
        guard let failure = FileSystem.makeDirectories(directory, mode: 0o755) else { return }
        guard !FileSystem.isOnReadOnlyFileSystem(directory) else {
            throw .journalFailed(path, "cannot create its directory \(directory): its file system is mounted read-only; put the journal on one that can be written")
        }
        throw .journalFailed(path, "cannot create its directory (\(failure)); give this user write access there, or put the journal elsewhere")
    }

    /// Creates the schema in a new file, or checks that an existing file is a journal of ours
    /// (upgrading an older one).
    ///
    /// The check and the creation share one write transaction, so two processes opening a
    /// new journal at once cannot both create it.
    private static func prepareSchema(_ database: SQLiteDatabase, path: String, mayCreate: Bool) throws(CommandBusError) {
        if mayCreate { try database.execute("BEGIN IMMEDIATE") }
        do throws(CommandBusError) {
            try checkOrCreateSchema(database, path: path, mayCreate: mayCreate)
            if mayCreate { try database.execute("COMMIT") }
        } catch {
            if mayCreate { try? database.execute("ROLLBACK") }
            throw error
        }
    }

    /// More commands than this accepted since the last sweep, and opening the file sweeps.
    package static let sweepOnOpenThreshold: Int64 = 64

    /// Sweeps (``SQLiteJournalSchema/sweep``) if more than ``sweepOnOpenThreshold`` commands
    /// were accepted since the last sweep, so recovery reads few commands past it: one-shot
    /// commands, which never record enough endings to sweep as they write, sweep now and then as
    /// they open the file. The sweep only saves recovery reading; it commits without a sync
    /// (in WAL mode a later synced commit makes it durable), and a sweep lost to a crash is redone.
    private static func sweepIfBehind(_ database: SQLiteDatabase) throws(CommandBusError) {
        let behind = try database.integer("SELECT coalesce((SELECT max(seq) FROM commands), 0) - (SELECT through FROM sweep)")
        // Behind by less than nothing: a mark an earlier prune left past the newest (the sweep mends it).
        guard behind > sweepOnOpenThreshold || behind < 0 else { return }
        try database.execute("PRAGMA synchronous = NORMAL; BEGIN IMMEDIATE")
        do throws(CommandBusError) {
            try SQLiteJournalStatements.sweep(database)
            try database.execute("COMMIT")
        } catch {
            try? database.execute("ROLLBACK")
            throw error
        }
    }

    private static func checkOrCreateSchema(_ database: SQLiteDatabase, path: String, mayCreate: Bool) throws(CommandBusError) {
        let applicationID: Int64, tables: Int64, version: Int64
        do {
            applicationID = try database.integer("PRAGMA application_id")
            tables = try database.integer("SELECT count(*) FROM sqlite_master")
            version = try database.integer("PRAGMA user_version")
        } catch {
            throw .journalFailed(path, error.message.hasPrefix("journal ") ? String(error.message.split(separator: ": ", maxSplits: 1).last ?? "") : error.message)
        }
        if applicationID == 0 && tables == 0 && mayCreate {
            try database.execute(SQLiteJournalSchema.current + "PRAGMA application_id = \(Self.applicationID); PRAGMA user_version = \(schemaVersion);")
            return
        }
        guard applicationID == Self.applicationID else {
            throw .journalFailed(path, "is an SQLite database but not a CommandBus journal; it was left untouched")
        }
        if version >= 1 && version < schemaVersion {
            guard mayCreate else {
                throw .journalFailed(path, "has journal schema version \(version); open it once with any journal command (cmdbus journal list) to upgrade it to version \(schemaVersion)")
            }
            // Step by step, in the transaction that checked the version: all of it happens or none.
            for step in version..<schemaVersion {
                guard let migration = SQLiteJournalSchema.migrations[step] else {
                    throw .journalFailed(path, "has journal schema version \(version), and this cmdbus cannot upgrade version \(step)")
                }
                try database.execute(migration)
            }
            try database.execute("PRAGMA user_version = \(schemaVersion);")
            return
        }
        guard version == schemaVersion else {
            throw .journalFailed(path, "has journal schema version \(version), newer than this cmdbus reads (\(schemaVersion)); it was left untouched: open it with the newer cmdbus that wrote it, or upgrade this one")
        }
    }

    // MARK: Journal

    /// Writes the command as pending (or marks a known one pending again); returns once durable,
    /// or with `.deferred` once written (its ending's sync makes it durable).
    public func accept(_ envelope: CommandEnvelope, payload: Data) async throws(CommandBusError) {
        try await write(.accept(AcceptedCommand(envelope, payload: payload)), waitUntilDurable: true)
    }

    /// Queues the transition, and waits for it to be durable if asked.
    public func update(_ update: JournalUpdate, waitUntilDurable: Bool) async throws(CommandBusError) {
        try await write(.update(update), waitUntilDurable: waitUntilDurable)
    }

    /// `true`: a write-ahead is queued with the journal's other writes, and its caller told from
    /// the committing thread.
    public var queuesWriteAheads: Bool { true }

    /// Stores a newly accepted command without waiting: `whenDurable` is called on the journal's
    /// thread once it is durable, after the commit it joined. Such write-aheads (a posted
    /// command's) commit after the journal's other writes, a few thousand at a time, so that a
    /// burst of posts does not hold up a `send` behind all of them. A `.deferred` journal that
    /// keeps a log (``JournalLog``) calls it once the log has written it: before returning, or,
    /// while the log syncs for others, from the syncing thread after its next write.
    public func accept(_ envelope: CommandEnvelope, payload: Data, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        writer.writeAhead(AcceptedCommand(envelope, payload: payload), whenDurable: whenDurable)
    }

    /// Records a transition without waiting: `whenDurable` is called on the journal's thread once
    /// it is durable (with a log, on the thread that synced it: often the caller's, before this returns).
    public func update(_ update: JournalUpdate, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        writer.write(.update(update), whenDurable: whenDurable)
    }

    /// Marks a command's entry failed after the fact (a replay found its payload stale).
    public func markFailed(_ id: UUID, error: CommandBusError) async throws(CommandBusError) {
        try await write(.markFailed(id, code: error.code.description, message: error.message), waitUntilDurable: true)
    }

    /// Links an undo to the command it undid.
    public func linkUndo(_ undo: UUID, of original: UUID) async throws(CommandBusError) {
        try await write(.linkUndo(undo: undo, original: original), waitUntilDurable: true)
    }

    /// Takes a command out of replay, or puts it back.
    public func setExcluded(_ id: UUID, _ excluded: Bool) async throws(CommandBusError) {
        try await write(.exclude(id, excluded), waitUntilDurable: true)
    }

    /// Takes a failed, cancelled or timed-out command out of the dead letters, or ends an unfinished
    /// one a dead process left as cancelled; its record stays.
    public func discard(_ id: UUID) async throws(CommandBusError) {
        try await write(.discard(id), waitUntilDurable: true)
    }

    /// One command's record.
    public func record(_ id: UUID) async throws(CommandBusError) -> JournalRecord? {
        try await read { statements throws(CommandBusError) in try statements.record(id) }
    }

    /// The records matching `query`, in journal order.
    public func records(_ query: JournalQuery) async throws(CommandBusError) -> [JournalRecord] {
        try await read { statements throws(CommandBusError) in try statements.records(query) }
    }

    /// Pending or running commands whose owning process is gone.
    public func unfinished() async throws(CommandBusError) -> [JournalRecord] {
        let candidates = try await read { statements throws(CommandBusError) in try statements.unfinishedWithOwners() }
        return candidates.filter { candidate in
            guard let owner = candidate.owner.flatMap(ProcessIdentity.init(text:)) else { return true }
            return owner != self.owner && !owner.isAlive
        }.map { $0.record }
    }

    /// Removes the trees of work that ended before `cutoff`: each root whose state is one of
    /// `rootStates` (any final state if empty) with every subcommand under it, once all of them
    /// ended before `cutoff`. Unfinished work, trees with a part that ended since, and the newest
    /// entry's tree (which holds the numbering) stay.
    /// A thousand trees go per transaction, so a server writing to the file waits for one at most.
    /// - Parameter dryRun: Only count what would be removed.
    /// - Returns: How many entries were removed (or would be).
    public func prune(endedBefore cutoff: Date, rootStates: Set<CommandState> = [], dryRun: Bool = false) async throws(CommandBusError) -> Int {
        var after: Int64 = 0
        var total = 0
        while true {
            let from = after
            let (removed, last) = try await read { statements throws(CommandBusError) in
                try statements.prune(endedBefore: cutoff, rootStates: rootStates, after: from, limit: 1_000, dryRun: dryRun)
            }
            total += removed
            guard let last else { return total }
            after = last
        }
    }

    /// Waits until every write queued so far is durable.
    public func flush() async throws(CommandBusError) {
        try await write(nil, waitUntilDurable: true)
    }

    // MARK: Writing

    private func write(_ operation: JournalWrite?, waitUntilDurable: Bool) async throws(CommandBusError) {
        try await writer.write(operation, waitUntilDurable: waitUntilDurable)
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteJournalStatements) throws(CommandBusError) -> T) async throws(CommandBusError) -> T {
        try await writer.read(body)
    }

    /// How long a write nobody waits for (a command starting to run, an ending recorded after
    /// the fact) may wait for company. A command's `running` update usually meets its ending in
    /// the same commit and becomes part of the ending's statement: one commit and one sync fewer
    /// per command, and the ending is never held up behind a commit of its own `running`.
    package static let unwaitedWriteDelay: Duration = .milliseconds(5)

    /// The most posted commands' write-aheads one commit takes, after the journal's other writes.
    package static var writeAheadsPerCommit: Int { JournalWriter.writeAheadsPerCommit }

    /// The connection's `PRAGMA synchronous` now: 2 (`FULL`) or 1 (`NORMAL`). For tests.
    package func synchronousSetting() async throws(CommandBusError) -> Int64 {
        try await read { statements throws(CommandBusError) in try statements.synchronousSetting() }
    }

    /// Called after each commit with how long it took, how many writes it held and whether it synced.
    package func observeCommits(_ observer: @escaping @Sendable (JournalCommit) -> Void) {
        writer.observeCommits(observer)
    }
}

/// One commit of the journal, as its observer hears of it.
package struct JournalCommit: Sendable {
    /// From `BEGIN` to the commit's return (durable, if it synced).
    package let duration: Duration
    /// How many writes it held.
    package let writes: Int
    /// Whether it synced; a commit nobody waited on leaves its sync to a later one.
    package let synced: Bool
}
