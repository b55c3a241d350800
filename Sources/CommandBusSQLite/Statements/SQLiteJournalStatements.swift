import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The journal's statements, prepared once, over the layout ``SQLiteJournalSchema`` describes.
/// Used only on the journal's queue (or by whoever holds its connection).
package final class SQLiteJournalStatements: @unchecked Sendable {
    let database: SQLiteDatabase
    private let insert: SQLiteStatement
    private let markRunning: SQLiteStatement
    private let insertEnding: SQLiteStatement
    // The reads' statements, used by SQLiteJournalStatements+Reads.swift.
    let selectOne: SQLiteStatement
    private let findRow: SQLiteStatement
    let selectUnfinished: SQLiteStatement
    // The sweep's statements, used by SQLiteJournalStatements+Sweep.swift.
    let sweepBounds: SQLiteStatement
    let insertUnended: SQLiteStatement
    private let rowInserts: JournalRowInserts
    /// Row ids of the commands accepted and not yet ended, so their endings name the row by integer key.
    var rowIDs: [CommandKey: Int64] = [:]
    /// Prepared statements of ``records(_:)``, by their SQL.
    var queryStatements: [String: SQLiteStatement] = [:]
    /// How many query shapes ``queryStatements`` keeps.
    static let cachedQueryLimit = 32
    /// Endings recorded since this connection last swept (``SQLiteJournalSchema/sweep``).
    private var endingsSinceSweep = 0
    /// The row ids of the commands this connection inserted since it last swept, in order.
    var insertedSinceSweep: [Int64] = []

    /// The columns of a record, in the order ``record(from:)`` reads them.
    package static let columns = "seq, id, name, parent_id, correlation_id, created_at, metadata, payload, state, attempts, result, error_code, error_message, updated_at, undo_of, undone_by, excluded, owner, started_at, finished_at, discarded_at"

    package init(_ database: SQLiteDatabase, readOnly: Bool = false) throws(CommandBusError) {
        self.database = database
        // A read-only connection can't prepare writes against a WAL file it may not touch; prepare reads only.
        let writes = readOnly ? "SELECT 1" : nil
        // A known command accepted again keeps the attempts of its earlier runs: an ended run's
        // are in its ending (``reopen(_:)`` adds them), and a run a dead process left running,
        // which never ended, made one.
        insert = try database.prepare(writes ?? """
            INSERT INTO commands (id, name, parent_id, correlation_id, created_at, metadata, payload, state, accepted_at, updated_at, owner)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?8, ?9)
            ON CONFLICT(id) DO UPDATE SET state = 'pending', accepted_at = ?8, updated_at = ?8, owner = ?9,
                result = NULL, error_code = NULL, error_message = NULL, finished_at = NULL, discarded_at = NULL,
                attempts = attempts + (state = 'running' AND NOT EXISTS (SELECT 1 FROM endings e WHERE e.seq = commands.seq))
            """)
        markRunning = try database.prepare(writes ??
            "UPDATE commands SET state = 'running', started_at = ?2, updated_at = ?2 WHERE seq = ?1 AND state = 'pending'"
        )
        // The first ending is kept: a later one (a handler finishing after its deadline ended the command) is dropped.
        insertEnding = try database.prepare(writes ?? """
            INSERT INTO endings (seq, state, attempts, result, error_code, error_message, started_at, finished_at, updated_at)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?8, ?7, ?7) ON CONFLICT(seq) DO NOTHING
            """)
        findRow = try database.prepare("SELECT seq FROM commands WHERE id = ?1")
        selectOne = try database.prepare("SELECT \(Self.columns) FROM entries WHERE id = ?1")
        selectUnfinished = try database.prepare("""
            SELECT \(Self.columns) FROM entries WHERE seq IN (SELECT seq FROM unended)
                AND seq <= (SELECT through FROM sweep) AND state IN ('pending', 'running')
            UNION ALL
            SELECT \(Self.columns) FROM entries WHERE seq > (SELECT through FROM sweep) AND state IN ('pending', 'running')
            ORDER BY seq
            """)
        sweepBounds = try database.prepare("SELECT through, (SELECT coalesce(max(seq), 0) FROM commands) FROM sweep")
        insertUnended = try database.prepare(writes ?? "INSERT OR IGNORE INTO unended (seq) VALUES (?1)")
        rowInserts = JournalRowInserts(database)
    }

    /// Whether the next commits sync (`FULL`) or leave the sync to a later commit (`NORMAL`; WAL mode
    /// keeps them consistent either way). Executed afresh each time: SQLite applies this pragma
    /// when the statement is prepared, so a prepared one stepped again changes nothing.
    package func setSyncAtCommit(_ sync: Bool) throws(CommandBusError) {
        try database.execute(sync ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
    }

    /// The connection's `PRAGMA synchronous`: 2 (`FULL`) syncs at commit, 1 (`NORMAL`) does not.
    package func synchronousSetting() throws(CommandBusError) -> Int64 {
        try database.integer("PRAGMA synchronous")
    }

    package func begin() throws(CommandBusError) { try database.execute("BEGIN IMMEDIATE") }
    package func commit() throws(CommandBusError) { try database.execute("COMMIT") }
    /// Rolls back, and forgets the rows this connection counted as its own since its last sweep:
    /// their row ids may be given to another writer's commands now, so the next sweep reads them all.
    package func rollback() {
        try? database.execute("ROLLBACK")
        insertedSinceSweep.removeAll()
    }

    /// The row id of an ending's command, which leaves the in-flight table (else it is looked up).
    private func endingRowID(_ id: UUID) throws(CommandBusError) -> Int64? {
        if let known = rowIDs.removeValue(forKey: CommandKey(id)) { return known }
        return try rowID(id)
    }

    /// The row id of `id`: from the in-flight table, else looked up.
    private func rowID(_ id: UUID) throws(CommandBusError) -> Int64? {
        if let known = rowIDs[CommandKey(id)] { return known }
        defer { findRow.reset() }
        findRow.bind(1, id)
        return try findRow.step() ? findRow.int64(0) : nil
    }

    /// Applies what a journal's log held (``JournalLog``) in one synced transaction, in the log's
    /// order. SQLite may hold any of it already (the process died after its commits; a power cut
    /// took only what SQLite had not synced), so each write must leave a journal that has it as it
    /// was: an accept of a command the journal knows is skipped (where applied it would accept the
    /// command again, dropping its ending), as is one a prune removed (``PrunedLogCommands``),
    /// and the other writes change nothing the second time.
    func applyLogged(_ entries: [JournalLogEntry]) throws(CommandBusError) {
        try setSyncAtCommit(true)
        try begin()
        do throws(CommandBusError) {
            var pruned = try PrunedLogCommands(mark: pruneMark(), entries: entries)
            for entry in entries {
                if case .accept(let command) = entry.write {
                    if try rowID(command.id) != nil { continue }
                    if try pruned.wasPruned(command, isInJournal: { id throws(CommandBusError) in try rowID(id) != nil }) { continue }
                }
                try apply([PendingWrite(operation: entry.write, completion: nil)], owner: entry.owner)
            }
            try commit()
        } catch {
            rollback()
            throw error
        }
    }

    /// Applies a batch of writes in one transaction's worth of statements (a write's `operation`
    /// and `startedAt`; `nil` operations are skipped).
    ///
    /// New commands and endings are queued and inserted up to
    /// ``JournalRowInserts/rowsPerStatement`` to a statement. Each command's own writes keep their
    /// order: a write about a command whose accept (or ending) is queued inserts the queue first,
    /// and any other kind of write inserts both queues first. Only writes about different
    /// commands change places, within the one transaction.
    package func apply(_ writes: [PendingWrite], owner: String) throws(CommandBusError) {
        var queued = QueuedRows()
        for index in writes.indices {
            guard let operation = writes[index].operation else { continue }
            switch operation {
            case .accept(let command):
                if queued.endings.contains(where: { $0.id == command.id }) { try insertQueuedEndings(&queued.endings) }
                queued.accepts.append(command)
                if queued.accepts.count == JournalRowInserts.rowsPerStatement { try insertQueuedAccepts(&queued.accepts, owner: owner) }
            case .update(let update):
                if queued.accepts.contains(where: { $0.id == update.id }) { try insertQueuedAccepts(&queued.accepts, owner: owner) }
                guard update.state.isTerminal else {
                    try apply(operation, owner: owner, startedAt: writes[index].startedAt)
                    continue
                }
                guard let row = try endingRowID(update.id) else { continue }
                queued.endings.append(QueuedEnding(id: update.id, row: row, update: update, startedAt: writes[index].startedAt))
                if queued.endings.count == JournalRowInserts.rowsPerStatement { try insertQueuedEndings(&queued.endings) }
            default:
                try insertQueued(&queued, owner: owner)
                try apply(operation, owner: owner, startedAt: writes[index].startedAt)
            }
        }
        try insertQueued(&queued, owner: owner)
        if endingsSinceSweep >= Self.sweepInterval {
            try sweepOwnCommands()
            endingsSinceSweep = 0
        }
    }

    /// The new commands and endings of the batch being applied, waiting to be inserted together.
    /// Local to ``apply(_:owner:)``: as stored properties of this class, each write's three looks
    /// at them were checked for exclusive access at run time, about 200 instructions a command
    /// on the journal's one writing thread.
    private struct QueuedRows {
        var accepts: [AcceptedCommand] = []
        var endings: [QueuedEnding] = []
    }

    /// Inserts the queued accepts, then the queued endings (when both are queued they are about
    /// different commands).
    private func insertQueued(_ queued: inout QueuedRows, owner: String) throws(CommandBusError) {
        try insertQueuedAccepts(&queued.accepts, owner: owner)
        try insertQueuedEndings(&queued.endings)
    }

    /// Inserts the queued new commands (`accepts`, emptied): one statement for several, and the
    /// upsert for one alone or for a known command among several.
    private func insertQueuedAccepts(_ accepts: inout [AcceptedCommand], owner: String) throws(CommandBusError) {
        guard !accepts.isEmpty else { return }
        defer { accepts.removeAll(keepingCapacity: true) }
        guard accepts.count > 1 else { return try accept(accepts[0], owner: owner) }
        let inserted = try rowInserts.insertNew(accepts[...], owner: owner, acceptedAt: Date().timeIntervalSince1970)
        if inserted.count == accepts.count {
            for (offset, command) in accepts.enumerated() {
                rowIDs[CommandKey(command.id)] = inserted.first + Int64(offset)
            }
            insertedSinceSweep.append(contentsOf: inserted.first..<(inserted.first + Int64(inserted.count)))
            return
        }
        // Some were known: the new ones have the row ids just given, and the known ones are
        // accepted again one at a time, as the upsert does.
        for command in accepts {
            guard let row = try rowID(command.id), row >= inserted.first else {
                try accept(command, owner: owner)
                continue
            }
            rowIDs[CommandKey(command.id)] = row
            insertedSinceSweep.append(row)
        }
    }

    /// Inserts the queued endings (`endings`, emptied): the rows they end were found as they were queued.
    private func insertQueuedEndings(_ endings: inout [QueuedEnding]) throws(CommandBusError) {
        guard !endings.isEmpty else { return }
        defer { endings.removeAll(keepingCapacity: true) }
        if endings.count == 1 {
            try insertEnding(endings[0])
        } else {
            try rowInserts.insert(endings[...])
        }
        endingsSinceSweep += endings.count
    }

    /// Inserts one command, or accepts a known one again (a recovery, a retry): the upsert.
    private func accept(_ command: AcceptedCommand, owner: String) throws(CommandBusError) {
        // Row ids start at 1: a last insert id still 0 after the upsert means it inserted nothing.
        database.lastInsertRowID = 0
        // The values are bound where they lie, in the command's own buffer, and the statement
        // is reset (its bindings cleared) while the command is held.
        let values = command.values
        insert.bindBorrowed(1, text: command.idText.bytes(in: values))
        insert.bindBorrowed(2, text: command.name.bytes(in: values))
        if let parent = command.parentText { insert.bindBorrowed(3, text: parent.bytes(in: values)) } else { insert.bind(3, nil as String?) }
        insert.bindBorrowed(4, text: command.correlationText.bytes(in: values))
        insert.bind(5, command.createdAt)
        if let metadata = command.metadataText { insert.bindBorrowed(6, text: metadata.bytes(in: values)) } else { insert.bind(6, nil as String?) }
        insert.bindBorrowed(7, nonNullBlob: command.payload.bytes(in: values))
        insert.bind(8, Date().timeIntervalSince1970)
        insert.bind(9, owner)
        try run(insert)
        // A new row sets the last insert id; an upsert of a known command (a recovery, a retry)
        // does not. (Compared with the id before, the first command of a new file, row 1,
        // looked known: the sweep table's row was the connection's last insert.)
        let inserted = database.lastInsertRowID
        if inserted != 0 {
            rowIDs[CommandKey(command.id)] = inserted
            insertedSinceSweep.append(inserted)
        } else if let row = try rowID(command.id) {
            try reopen(row)
            rowIDs[CommandKey(command.id)] = row
        }
    }

    /// Inserts one ending.
    private func insertEnding(_ ending: QueuedEnding) throws(CommandBusError) {
        let update = ending.update
        insertEnding.bind(1, ending.row)
        insertEnding.bind(2, Self.name(of: update.state))
        insertEnding.bind(3, Int64(update.attempts))
        insertEnding.bind(5, update.errorCode)
        insertEnding.bind(6, update.errorMessage)
        insertEnding.bind(7, update.at.timeIntervalSince1970)
        if let startedAt = ending.startedAt { insertEnding.bind(8, startedAt.timeIntervalSince1970) } else { insertEnding.bind(8, nil as Int64?) }
        // The result is bound where it lies, and the statement reset before it is let go. No
        // result, like an empty one, has no bytes, and empty bytes bind NULL.
        try (update.result ?? Data()).withUnsafeBytes { bytes -> Result<Void, CommandBusError> in
            insertEnding.bindBorrowed(4, blob: bytes)
            return outcome(of: insertEnding)
        }.get()
    }

    /// Applies a write that is neither a new command nor an ending: `running`, and the rare ones.
    private func apply(_ write: JournalWrite, owner: String, startedAt: Date?) throws(CommandBusError) {
        switch write {
        case .accept(let command):
            try accept(command, owner: owner)
        case .update(let update) where update.state == .running:
            guard let row = try rowID(update.id) else { return }
            markRunning.bind(1, row)
            markRunning.bind(2, update.at.timeIntervalSince1970)
            try run(markRunning)
        case .update(let update):
            guard let row = try endingRowID(update.id) else { return }
            try insertEnding(QueuedEnding(id: update.id, row: row, update: update, startedAt: startedAt))
            endingsSinceSweep += 1
        case .linkUndo(let undo, let original):
            try database.execute("UPDATE commands SET undone_by = '\(undo.uuidString)' WHERE id = '\(original.uuidString)'")
            try database.execute("UPDATE commands SET undo_of = '\(original.uuidString)' WHERE id = '\(undo.uuidString)'")
        case .markFailed(let id, let code, let message):
            // The result and the times stay; a command that had not ended gets an ending without them.
            let statement = try database.prepare("""
                INSERT INTO endings (seq, state, error_code, error_message, updated_at)
                SELECT seq, 'failed', ?2, ?3, ?4 FROM commands WHERE id = ?1
                ON CONFLICT(seq) DO UPDATE SET state = 'failed', error_code = excluded.error_code,
                    error_message = excluded.error_message, updated_at = excluded.updated_at
                """)
            statement.bind(1, id)
            statement.bind(2, code)
            statement.bind(3, message)
            statement.bind(4, Date().timeIntervalSince1970)
            try run(statement)
        case .exclude(let id, let excluded):
            try database.execute("UPDATE commands SET excluded = \(excluded ? 1 : 0) WHERE id = '\(id.uuidString)'")
        case .discard(let id):
            // A dead letter keeps its ending; an unfinished command (its process died) ends cancelled.
            // The ending is written first: both statements act only on a command not yet discarded.
            let ending = try database.prepare("""
                INSERT INTO endings (seq, state, error_code, error_message, finished_at, updated_at)
                SELECT seq, 'cancelled', 'cancelled', 'discarded with cmdbus journal discard: the process running it died', ?2, ?2
                FROM commands WHERE id = ?1 AND discarded_at IS NULL
                ON CONFLICT(seq) DO UPDATE SET finished_at = coalesce(finished_at, excluded.finished_at), updated_at = excluded.updated_at
                """)
            // One time for both rows, as version 3's single statement had.
            let now = Date().timeIntervalSince1970
            ending.bind(1, id)
            ending.bind(2, now)
            try run(ending)
            let statement = try database.prepare("UPDATE commands SET discarded_at = ?2, updated_at = ?2 WHERE id = ?1 AND discarded_at IS NULL")
            statement.bind(1, id)
            statement.bind(2, now)
            try run(statement)
        }
    }

    /// A state's name as a literal, which SQLite binds without copying.
    static func name(of state: CommandState) -> StaticString {
        switch state {
        case .pending: "pending"
        case .running: "running"
        case .succeeded: "succeeded"
        case .failed: "failed"
        case .cancelled: "cancelled"
        case .timedOut: "timedOut"
        }
    }

    /// A known command accepted again (recovery, a retry) has no ending: the attempts of the
    /// ending it had stay counted in `commands`, the ending goes, and a command an earlier
    /// sweep passed joins `unended` so recovery still finds it.
    private func reopen(_ row: Int64) throws(CommandBusError) {
        try database.execute("""
            UPDATE commands SET attempts = attempts + coalesce((SELECT attempts FROM endings WHERE seq = \(row)), 0) WHERE seq = \(row);
            DELETE FROM endings WHERE seq = \(row);
            INSERT OR IGNORE INTO unended (seq) SELECT \(row) WHERE \(row) <= (SELECT through FROM sweep);
            """)
    }

    /// Runs `statement`, with its outcome as a value: for a closure such as `withUnsafeBytes`'s,
    /// which cannot throw a typed error.
    private func outcome(of statement: SQLiteStatement) -> Result<Void, CommandBusError> {
        do throws(CommandBusError) { try run(statement) } catch { return .failure(error) }
        return .success(())
    }

    func run(_ statement: SQLiteStatement) throws(CommandBusError) {
        defer { statement.reset() }
        try statement.step()
    }
}
