import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What one ``BusJournal/importHistory(_:)`` did with the entries it was given.
package struct BusImportCounts: Sendable, Equatable {
    /// Entries the bus did not have, now added as history.
    package var added = 0
    /// Entries the bus already had (an import run again), left as they are.
    package var present = 0
    /// Entries that had not finished (a process died while they ran): they are left out, since
    /// the bus would take them as work to run or as a host's.
    package var unfinished = 0
    /// Entries `journal undo --rebuild` took out of the journal's replay, which the bus has no
    /// place for: left out, so a replay of the bus comes to the same state as the journal's.
    package var excluded = 0

    /// Creates counts, all zero.
    package init() {}

    /// The sum of two imports' counts.
    package static func + (lhs: Self, rhs: Self) -> Self {
        var sum = lhs
        sum.added += rhs.added
        sum.present += rhs.present
        sum.unfinished += rhs.unfinished
        sum.excluded += rhs.excluded
        return sum
    }
}

extension BusJournal {
    /// The most payload and result bytes one import statement carries; a statement holds fewer
    /// entries rather than more (and always at least one).
    static let importStatementBytes = 4 << 20

    /// Adds another journal's finished entries to the bus as history, under their ids and with
    /// their trees, states, results, errors, attempts, times and undo links: nothing runs again.
    /// Entries go in a few statements (one commit each) of up to 1,000 entries or
    /// ``importStatementBytes``, where one statement each made a commit each (about 2,000 a second).
    /// - Throws: `statementFailed`, naming the entry, for one PostgreSQL cannot keep (a NUL in a
    ///   name, metadata or error message); the statements before it are on the bus.
    package func importHistory(_ records: [JournalRecord]) throws(PGError) -> BusImportCounts {
        var counts = BusImportCounts()
        var statement: [JournalRecord] = [], bytes = 0
        func insertStatement() throws(PGError) {
            guard !statement.isEmpty else { return }
            let added = try insertHistory(statement)
            counts.added += added
            counts.present += statement.count - added
            statement.removeAll(keepingCapacity: true)
            bytes = 0
        }
        for record in records {
            guard record.state.isTerminal else { counts.unfinished += 1; continue }
            guard !record.excluded else { counts.excluded += 1; continue }
            if let reason = Self.unstorableReason(record) { throw PGError(.statementFailed, reason) }
            let size = record.payload.count + (record.result?.count ?? 0)
            if statement.count == 1_000 || (!statement.isEmpty && bytes + size > Self.importStatementBytes) { try insertStatement() }
            statement.append(record)
            bytes += size
        }
        try insertStatement()
        return counts
    }

    /// Why PostgreSQL could not keep an entry as it is, if it could not: a `text` column holds
    /// no NUL character (payloads and results are `bytea`, which takes any byte).
    private static func unstorableReason(_ record: JournalRecord) -> String? {
        let envelope = record.envelope
        let texts = [envelope.commandName, record.errorCode ?? "", record.errorMessage ?? ""]
            + envelope.metadata.keys + envelope.metadata.values
        guard texts.contains(where: { $0.utf8.contains(0) }) else { return nil }
        return "entry \(envelope.id) (\(quoted(envelope.commandName))) has a NUL character (\\u0000) in its name, metadata or "
            + "error, which the shared bus cannot keep; the entries before it are on the bus (importing again skips them)"
    }

    /// Inserts finished entries in one statement; returns how many were new.
    private func insertHistory(_ records: [JournalRecord]) throws(PGError) -> Int {
        var payloads = Data(), results = Data()
        var payloadAt: [Int?] = [], payloadLength: [Int?] = [], resultAt: [Int?] = [], resultLength: [Int?] = []
        for record in records {
            payloadAt.append(payloads.count)
            payloadLength.append(record.payload.count)
            payloads.append(record.payload)
            resultAt.append(record.result.map { _ in results.count })
            resultLength.append(record.result?.count)
            if let result = record.result { results.append(result) }
        }
        let envelopes = records.map(\.envelope)
        let rows = try connections.with { connection throws(PGError) in
            try connection.execute(BusSQL.importHistory, [
                .uuidArray(envelopes.map(\.id)), .textArray(envelopes.map(\.commandName)),
                .textArray(envelopes.map { PGValue.metadataText($0.metadata) }), .uuidArray(envelopes.map(\.parentID)),
                .uuidArray(envelopes.map(\.correlationID)), .integerArray(envelopes.map(\.depth), type: 1007),
                .textArray(records.map(\.state.rawValue)), .integerArray(records.map(\.attempts), type: 1007),
                .doubleArray(envelopes.map(\.createdAt.timeIntervalSince1970)),
                .doubleArray(records.map { $0.startedAt?.timeIntervalSince1970 }),
                .doubleArray(records.map { ($0.finishedAt ?? $0.updatedAt).timeIntervalSince1970 }),
                .textArray(records.map(\.errorCode)), .textArray(records.map(\.errorMessage)),
                .uuidArray(records.map(\.undoOf)), .uuidArray(records.map(\.undoneBy)),
                .bytes(payloads), .integerArray(payloadAt), .integerArray(payloadLength),
                .bytes(results), .integerArray(resultAt), .integerArray(resultLength),
            ])
        }
        return rows.count
    }
}
