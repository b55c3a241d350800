import CommandBusSupport
import CommandBus
import Dispatch
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A ``Journal`` in an SQLite file, in WAL mode, with group commit.
///
/// Writes queue up and are committed together, one transaction and one sync for many commands
/// (`.batched`), or each in its own transaction (`.synced`). Several processes can share one file:
/// SQLite's locks and a busy timeout serialize them, and recovery leaves alone the commands of
/// processes still running. A file that is not a CommandBus journal, or is damaged, is refused
/// and never written to.
/// ```swift
/// let journal = try SQLiteJournal(path: ".cmdbus/journal.sqlite")
/// let bus = CommandBus(configuration: .init(journal: journal))
/// ```
public final class SQLiteJournal: Journal, @unchecked Sendable {
    // The connection and statements are used only on `queue`; everything else is under locks.

    /// How writes reach the disk.
    public enum Durability: Sendable, Hashable {
        /// Each write is its own transaction, synced before it returns.
        case synced
        /// Group commit: writes that arrive while a commit is under way (or within `maxDelay`
        /// of the first) share the next transaction and its one sync. With `.zero`, a write waits
        /// at most for the commit before it.
        case batched(maxDelay: Duration)
        /// Group commit with one sync per command instead of two: a command's write-ahead is
        /// committed (in the operating system's hands, so it survives the process dying) before
        /// the command is scheduled, and made durable by the sync of its ending, before anyone
        /// hears of that. A power cut or kernel crash while a command runs can lose its entry;
        /// its caller never got an answer.
        case deferred
    }

    /// The file.
    public let path: String
    /// How writes reach the disk.
    public let durability: Durability

    private let database: SQLiteDatabase
    private let statements: SQLiteJournalStatements
    private let queue = DispatchQueue(label: "cmdbus.journal")
    private let pending = Mutex<(writes: [PendingWrite], scheduled: DrainSchedule, timers: UInt64)>(([], .none, 0))
    private let owner = ProcessIdentity.current
    private let commitObserver = Mutex<(@Sendable (JournalCommit) -> Void)?>(nil)
    /// Whether the connection syncs at commit (`PRAGMA synchronous = FULL`) or leaves it to a later
    /// commit (`NORMAL`). Used only on `queue`.
    private var syncsAtCommit = true
    /// How long a write nobody waits for may wait for company (``unwaitedWriteDelay`` unless a test says otherwise).
    private let unwaitedDelay: Duration

    /// The schema version this code writes.
    package static let schemaVersion: Int64 = 2
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
        try self.init(path: path, durability: durability, create: create, readOnly: readOnly, unwaitedDelay: Self.unwaitedWriteDelay)
    }

    /// Opens the journal with a different wait for writes nobody waits for (tests stretch it to see commits apart).
    package init(
        path: String, durability: Durability, create: Bool, readOnly: Bool, unwaitedDelay: Duration
    ) throws(CommandBusError) {
        self.path = path
        self.durability = durability
        self.unwaitedDelay = unwaitedDelay
        let exists = try JournalFileCheck.validate(path)
        if !exists {
            guard create, !readOnly else { throw .journalFailed(path, "does not exist (or is empty)") }
            try Self.makeParentDirectory(of: path)
        }
        database = try SQLiteDatabase(path: path, create: !exists, readOnly: readOnly)
        try database.execute("PRAGMA busy_timeout = 10000")
        try Self.prepareSchema(database, path: path, mayCreate: !readOnly)
        if !readOnly { try database.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL") }
        statements = try SQLiteJournalStatements(database, readOnly: readOnly)
    }

    private static func makeParentDirectory(of path: String) throws(CommandBusError) {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let directory = String(path[..<slash])
        if case .directory = FileSystem.kind(of: directory) { return }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw .journalFailed(path, "cannot create its directory \(directory): \(error)")
        }
    }

    /// Creates the schema in a new file, or checks that an existing file is a journal of ours.
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
            try database.execute(SQLiteJournalStatements.schema + "PRAGMA application_id = \(Self.applicationID); PRAGMA user_version = \(schemaVersion);")
            return
        }
        guard applicationID == Self.applicationID else {
            throw .journalFailed(path, "is an SQLite database but not a CommandBus journal; it was left untouched")
        }
        if version == 1 && mayCreate {
            try database.execute(SQLiteJournalStatements.migrationFromVersion1 + "PRAGMA user_version = \(schemaVersion);")
            return
        }
        if version == 1 {
            throw .journalFailed(path, "has journal schema version 1; open it once with any journal command (cmdbus journal list) to upgrade it to version \(schemaVersion)")
        }
        guard version == schemaVersion else {
            throw .journalFailed(path, "has journal schema version \(version); this cmdbus reads version \(schemaVersion)")
        }
    }

    // MARK: Journal

    /// Writes the command as pending (or marks a known one pending again); returns once durable,
    /// or with `.deferred` once committed (its ending's sync makes it durable).
    public func accept(_ envelope: CommandEnvelope, payload: Data) async throws(CommandBusError) {
        try await write(.accept(envelope, payload), waitUntilDurable: true)
    }

    /// Queues the transition, and waits for it to be durable if asked.
    public func update(_ update: JournalUpdate, waitUntilDurable: Bool) async throws(CommandBusError) {
        try await write(.update(update), waitUntilDurable: waitUntilDurable)
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

    /// Waits until every write queued so far is durable.
    public func flush() async throws(CommandBusError) {
        try await write(nil, waitUntilDurable: true)
    }

    // MARK: Writing

    private func write(_ operation: JournalWrite?, waitUntilDurable: Bool) async throws(CommandBusError) {
        if !waitUntilDurable {
            enqueue(PendingWrite(operation: operation, completion: nil))
            return
        }
        let result: Result<Void, CommandBusError> = await withUnsafeContinuation { continuation in
            enqueue(PendingWrite(operation: operation, completion: continuation))
        }
        try result.get()
    }

    /// When the queued writes will next be committed.
    private enum DrainSchedule: Equatable {
        case none
        /// Only writes nobody waits for are queued: they wait for a write somebody does wait for, or
        /// a few milliseconds. The number names the timer, so a timer whose writes an earlier drain
        /// took (the usual case: a command's ending took its `running`) commits nothing when it fires.
        case later(UInt64)
        case now
    }

    /// How long a write nobody waits for (a command starting to run, an ending recorded after
    /// the fact) may wait for company. A command's `running` update usually meets its ending in
    /// the same commit and becomes part of the ending's statement: one commit and one sync fewer
    /// per command, and the ending is never held up behind a commit of its own `running`.
    package static let unwaitedWriteDelay: Duration = .milliseconds(5)

    private func enqueue(_ write: PendingWrite) {
        let urgent = write.completion != nil
        let schedule = pending.withLock { state -> DrainSchedule in
            state.writes.append(write)
            switch (state.scheduled, urgent) {
            case (.now, _), (.later, false): return .none
            case (_, true): state.scheduled = .now; return .now
            case (.none, false):
                state.timers &+= 1
                state.scheduled = .later(state.timers)
                return state.scheduled
            }
        }
        switch (schedule, durability) {
        case (.none, _):
            return
        case (.later(let timer), _):
            queue.asyncAfter(deadline: .now() + Self.dispatchInterval(unwaitedDelay)) { self.drain(timer: timer) }
        case (.now, .batched(let delay)) where delay > .zero:
            queue.asyncAfter(deadline: .now() + Self.dispatchInterval(delay)) { self.drain() }
        case (.now, _):
            queue.async { self.drain() }
        }
    }

    private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        .nanoseconds(Int(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000))
    }

    /// Commits everything queued: one transaction for the lot, or one each when synced.
    /// A drain that finds nothing (an earlier one took its writes) commits nothing, and so does a
    /// timer (`timer`) the schedule has moved past: an urgent drain is due, or a newer timer is set.
    private func drain(timer: UInt64? = nil) {
        let writes = pending.withLock { state -> [PendingWrite] in
            if let timer, state.scheduled != .later(timer) { return [] }
            defer { state.writes = []; state.scheduled = .none }
            return state.writes
        }
        guard !writes.isEmpty else { return }
        switch durability {
        case .synced:
            for write in writes { commit([write]) }
        case .batched, .deferred:
            commit(writes)
        }
    }

    /// Whether committing `writes` must sync: always when `.synced`, else only when somebody waits
    /// for one of them to be durable. Writes nobody waits for (a command starting, an ending recorded after the fact)
    /// become durable with the next commit that syncs; so does a deferred write-ahead.
    private func mustSync(_ writes: [PendingWrite]) -> Bool {
        if case .synced = durability { return true }
        return writes.contains { write in
            guard write.completion != nil else { return false }
            if case .deferred = durability, case .accept? = write.operation { return false }
            return true
        }
    }

    /// Called after each commit with how long it took, how many writes it held and whether it synced.
    package func observeCommits(_ observer: @escaping @Sendable (JournalCommit) -> Void) {
        commitObserver.withLock { $0 = observer }
    }

    private func commit(_ writes: [PendingWrite]) {
        let began = ContinuousClock.now
        let sync = mustSync(writes)
        let outcome: Result<Void, CommandBusError>
        do throws(CommandBusError) {
            if sync != syncsAtCommit {
                try statements.setSyncAtCommit(sync)
                syncsAtCommit = sync
            }
            try statements.begin()
            do throws(CommandBusError) {
                try statements.apply(writes.compactMap(\.operation), owner: owner.text)
                try statements.commit()
                outcome = .success(())
            } catch {
                statements.rollback()
                throw error
            }
        } catch {
            outcome = .failure(error)
        }
        // Observed before anyone waiting hears of it, so what they do next finds it counted.
        commitObserver.withLock { $0 }?(JournalCommit(duration: .now - began, writes: writes.count, synced: sync))
        for write in writes { write.completion?.resume(returning: outcome) }
    }

    private func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteJournalStatements) throws(CommandBusError) -> T) async throws(CommandBusError) -> T {
        let statements = self.statements
        let result: Result<T, CommandBusError> = await withUnsafeContinuation { continuation in
            queue.async {
                do throws(CommandBusError) { continuation.resume(returning: .success(try body(statements))) } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
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

/// One queued write and whoever waits for it to be durable.
package struct PendingWrite: @unchecked Sendable {
    package let operation: JournalWrite?
    package let completion: UnsafeContinuation<Result<Void, CommandBusError>, Never>?
}

/// The writes the journal makes.
package enum JournalWrite: Sendable {
    case accept(CommandEnvelope, Data)
    case update(JournalUpdate)
    case linkUndo(undo: UUID, original: UUID)
    case exclude(UUID, Bool)
    case markFailed(UUID, code: String, message: String)
    case discard(UUID)
}
