import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The journal's reads: one record, the unfinished ones for recovery, and queries, each a
/// prepared statement kept for the next read of its shape.
extension SQLiteJournalStatements {
    package func record(_ id: UUID) throws(CommandBusError) -> JournalRecord? {
        defer { selectOne.reset() }
        selectOne.bind(1, id)
        return try selectOne.step() ? Self.record(from: selectOne).record : nil
    }

    package func unfinishedWithOwners() throws(CommandBusError) -> [(record: JournalRecord, owner: String?)] {
        defer { selectUnfinished.reset() }
        var rows: [(JournalRecord, String?)] = []
        while try selectUnfinished.step() { rows.append(Self.record(from: selectUnfinished)) }
        return rows
    }

    /// The records matching `query`, in journal order (newest first if it asks).
    package func records(_ query: JournalQuery) throws(CommandBusError) -> [JournalRecord] {
        let sql = Self.sql(reading: query)
        let statement = try queryStatement(sql)
        defer { statement.reset() }
        if let name = query.commandName { statement.bind(1, name) }
        if let correlation = query.correlationID { statement.bind(2, correlation) }
        if let since = query.createdSince { statement.bind(3, since.timeIntervalSince1970) }
        if let after = query.afterSequence { statement.bind(4, after) }
        if let through = query.throughSequence { statement.bind(5, through) }
        if let limit = query.limit { statement.bind(6, Int64(limit)) }
        var records: [JournalRecord] = []
        while try statement.step() { records.append(Self.record(from: statement).record) }
        return records
    }

    /// The SQL ``records(_:)`` runs for `query`; its values are bound as `?1` to `?6`.
    ///
    /// A read of dead letters only goes down their index (``SQLiteJournalSchema/deadLetterIndex``)
    /// in its order and looks each one up: a page of them costs a page of rows, whether the
    /// journal holds three or a million. (Read through `entries` in journal order, a page of
    /// three failed among 2 million read them all, 0.58 s; and `seq IN (…)` of the index read
    /// every dead letter first, 0.25 s for 500,000.)
    package static func sql(reading query: JournalQuery) -> String {
        var clauses: [String] = []
        var source = "entries", order = "seq"
        if !query.states.isEmpty {
            let states = "state IN (" + query.states.map { "'\($0.rawValue)'" }.sorted().joined(separator: ", ") + ")"
            clauses.append(states)
            if query.states.allSatisfy(\.isDeadLetter) {
                source = "(SELECT seq AS dead FROM endings WHERE \(SQLiteJournalSchema.deadLetterStates) AND \(states)) d JOIN entries ON entries.seq = d.dead"
                order = "d.dead"
            }
        }
        if query.commandName != nil { clauses.append("name = ?1") }
        // Bounds on the index read itself, for a dead letter: a page further back starts there.
        if query.afterSequence != nil { clauses.append("\(order) > ?4") }
        if query.throughSequence != nil { clauses.append("\(order) <= ?5") }
        if query.correlationID != nil { clauses.append(treeCondition) }
        if query.createdSince != nil { clauses.append("created_at >= ?3") }
        var sql = "SELECT \(columns) FROM \(source)"
        if !clauses.isEmpty { sql += " WHERE " + clauses.joined(separator: " AND ") }
        sql += query.newestFirst ? " ORDER BY \(order) DESC" : " ORDER BY \(order)"
        if query.limit != nil { sql += " LIMIT ?6" }
        return sql
    }

    /// `correlation_id = ?2`, written so SQLite finds the tree through two indexes: its root by
    /// `id` and its subcommands through `commands_correlation`, which holds only commands whose
    /// correlation id is not their own (``SQLiteJournalSchema``). SQLite uses a partial index only
    /// for a condition that says its `WHERE`; `correlation_id = ?2` alone reads every command.
    package static let treeCondition = "((id = ?2 AND correlation_id = ?2) OR (correlation_id = ?2 AND correlation_id <> id))"

    /// The prepared statement for a query's SQL, kept for the next query of the same shape: a
    /// replay, a listing or the dashboard pages through one, and preparing a query over the
    /// `entries` view costs about 0.3M instructions. Only values differ between pages, and
    /// they are bound. At most ``cachedQueryLimit`` are kept; a full cache starts again.
    private func queryStatement(_ sql: String) throws(CommandBusError) -> SQLiteStatement {
        if let cached = queryStatements[sql] { return cached }
        if queryStatements.count >= Self.cachedQueryLimit { queryStatements.removeAll() }
        let statement = try database.prepare(sql)
        queryStatements[sql] = statement
        return statement
    }

    package static func record(from row: SQLiteStatement) -> (record: JournalRecord, owner: String?) {
        func date(_ column: Int32) -> Date? { row.isNull(column) ? nil : Date(timeIntervalSince1970: row.double(column)) }
        let id = row.uuid(1) ?? UUID()
        var envelope = CommandEnvelope(
            commandName: row.string(2) ?? "", id: id, createdAt: Date(timeIntervalSince1970: row.double(5))
        )
        envelope.parentID = row.uuid(3)
        envelope.correlationID = row.uuid(4) ?? id
        if let metadata = row.string(6), case .object(let fields)? = JSONValue.parse(metadata) {
            envelope.metadata = fields.compactMapValues { if case .string(let value) = $0 { value } else { nil } }
        }
        // The journal counts a run's attempts when it ends; a running command is on one more.
        let state = row.state(8) ?? .failed
        let record = JournalRecord(
            sequence: row.int64(0), envelope: envelope, payload: row.data(7) ?? Data(),
            state: state, attempts: Int(row.int64(9)) + (state == .running ? 1 : 0),
            result: row.data(10), errorCode: row.string(11), errorMessage: row.string(12),
            updatedAt: Date(timeIntervalSince1970: row.double(13)),
            undoOf: row.uuid(14), undoneBy: row.uuid(15),
            excluded: row.int64(16) != 0, startedAt: date(18), finishedAt: date(19), discardedAt: date(20)
        )
        return (record, row.string(17))
    }
}
