import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A command's ending, with the row it ends, waiting to be inserted with others.
struct QueuedEnding {
    let id: UUID
    let row: Int64
    let update: JournalUpdate
    /// When the command started, if its `running` write was taken into the ending.
    let startedAt: Date?
}

/// Inserts many new commands, or many endings, with one statement each: what the journal's
/// writing thread does with the accepts and endings of a busy commit.
///
/// Under callgrind, a one-row INSERT into `commands` cost about 28,000 instructions and one of
/// sixteen rows about 17,000 a row: each statement opens a cursor on the table and on each of
/// its three indexes and finds its place from the root, and SQLite's bookkeeping for a
/// statement comes once per statement. An ending's insert went from about 7,500 to 5,700.
/// Statements are prepared the first time a row count is needed, and kept.
///
/// They are `INSERT OR FAIL`: a statement of several rows that may stop half-way with `ABORT`
/// keeps a statement journal to undo its own rows, and SQLite spilled it to a temporary file,
/// two writes for each page the statement touched. The journal's transaction is rolled back
/// whole on any error, so the statement's own undo was never needed. A known command is
/// skipped (`DO NOTHING`), not an error.
final class JournalRowInserts {
    /// The most rows one statement inserts.
    static let rowsPerStatement = 16

    private let database: SQLiteDatabase
    /// Statements by row count: `commandStatements[n]` inserts `n` commands.
    private var commandStatements: [SQLiteStatement?] = Array(repeating: nil, count: rowsPerStatement + 1)
    private var endingStatements: [SQLiteStatement?] = Array(repeating: nil, count: rowsPerStatement + 1)

    init(_ database: SQLiteDatabase) {
        self.database = database
    }

    /// Inserts `commands` as new rows, in order, all accepted by `owner` at `acceptedAt`, and
    /// skips any already in the journal (a recovery, a retry). Returns the row ids it gave, one
    /// after another, and how many: SQLite gives a new row the largest row id plus one, and the
    /// write transaction lets nobody insert in between. When it inserted them all, the first
    /// row id is the first command's; when it inserted none, it is `Int64.max`.
    func insertNew(_ commands: ArraySlice<AcceptedCommand>, owner: String, acceptedAt: Double) throws(CommandBusError) -> (first: Int64, count: Int) {
        let statement = try commandStatement(rows: commands.count)
        defer { statement.reset() }
        statement.bind(1, owner)
        statement.bind(2, acceptedAt)
        for (offset, command) in commands.enumerated() {
            // Bound where they lie: each command's buffer lives as long as the command, which
            // the caller holds until the statement is reset.
            let values = command.values
            let base = Int32(2 + offset * 7)
            statement.bindBorrowed(base + 1, text: command.idText.bytes(in: values))
            statement.bindBorrowed(base + 2, text: command.name.bytes(in: values))
            if let parent = command.parentText { statement.bindBorrowed(base + 3, text: parent.bytes(in: values)) }
            statement.bindBorrowed(base + 4, text: command.correlationText.bytes(in: values))
            statement.bind(base + 5, command.createdAt)
            if let metadata = command.metadataText { statement.bindBorrowed(base + 6, text: metadata.bytes(in: values)) }
            statement.bindBorrowed(base + 7, nonNullBlob: command.payload.bytes(in: values))
        }
        database.lastInsertRowID = 0
        try statement.step()
        let inserted = database.changes
        guard inserted > 0 else { return (.max, 0) }
        return (database.lastInsertRowID - Int64(inserted) + 1, inserted)
    }

    /// Inserts `endings`, in order; as with one, the first ending of a command is kept.
    func insert(_ endings: ArraySlice<QueuedEnding>) throws(CommandBusError) {
        let statement = try endingStatement(rows: endings.count)
        defer { statement.reset() }
        for (offset, ending) in endings.enumerated() {
            let base = Int32(offset * 8)
            let update = ending.update
            statement.bind(base + 1, ending.row)
            statement.bind(base + 2, SQLiteJournalStatements.name(of: update.state))
            statement.bind(base + 3, Int64(update.attempts))
            // Copied: a small `Data` keeps its bytes inline, with no address that outlives a
            // closure. No result, like an empty one, binds NULL.
            statement.bind(base + 4, update.result)
            statement.bind(base + 5, update.errorCode)
            statement.bind(base + 6, update.errorMessage)
            statement.bind(base + 7, update.at.timeIntervalSince1970)
            if let startedAt = ending.startedAt { statement.bind(base + 8, startedAt.timeIntervalSince1970) }
        }
        try statement.step()
    }

    private func commandStatement(rows: Int) throws(CommandBusError) -> SQLiteStatement {
        if let statement = commandStatements[rows] { return statement }
        let values = (0..<rows).map { row in
            let base = 2 + row * 7
            return "(?\(base + 1), ?\(base + 2), ?\(base + 3), ?\(base + 4), ?\(base + 5), ?\(base + 6), ?\(base + 7), 'pending', ?2, ?2, ?1)"
        }
        let statement = try database.prepare("""
            INSERT OR FAIL INTO commands (id, name, parent_id, correlation_id, created_at, metadata, payload, state, accepted_at, updated_at, owner)
            VALUES \(values.joined(separator: ", ")) ON CONFLICT(id) DO NOTHING
            """)
        commandStatements[rows] = statement
        return statement
    }

    private func endingStatement(rows: Int) throws(CommandBusError) -> SQLiteStatement {
        if let statement = endingStatements[rows] { return statement }
        let values = (0..<rows).map { row in
            let base = row * 8
            return "(?\(base + 1), ?\(base + 2), ?\(base + 3), ?\(base + 4), ?\(base + 5), ?\(base + 6), ?\(base + 8), ?\(base + 7), ?\(base + 7))"
        }
        let statement = try database.prepare("""
            INSERT OR FAIL INTO endings (seq, state, attempts, result, error_code, error_message, started_at, finished_at, updated_at)
            VALUES \(values.joined(separator: ", ")) ON CONFLICT(seq) DO NOTHING
            """)
        endingStatements[rows] = statement
        return statement
    }
}
