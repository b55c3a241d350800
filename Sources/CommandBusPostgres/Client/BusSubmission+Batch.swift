#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension BusSubmission {
    /// The most payload bytes one batch statement carries; a batch stops short of it.
    package static let batchPayloadBytes = 4 << 20

    /// Posts root commands in one statement: one commit and one notification per name, where
    /// ``submit(on:)`` makes one of each per command. Each is a post (it waits for a host that
    /// handles it); an empty idempotency key counts as none.
    /// - Returns: For each submission, in order, the id it runs under (the first command's, for
    ///   a key seen before or earlier in the batch) and whether it is new.
    /// - Throws: `statementFailed`, inserting nothing, if any submission has an ``unstorableReason``.
    package static func submitPosts(_ submissions: [BusSubmission], on connection: PGConnection) throws(PGError) -> [(id: UUID, created: Bool)] {
        guard !submissions.isEmpty else { return [] }
        precondition(submissions.allSatisfy { $0.parentID == nil && !$0.isProbe && !$0.failIfUnhandled }, "submitPosts takes root posts")
        let (payloads, offsets, lengths) = try packed(submissions)
        let rows = try connection.execute(BusSQL.submitPosts, [
            .uuidArray(submissions.map(\.id)), .textArray(submissions.map(\.name)), .bytes(payloads),
            .textArray(submissions.map { PGValue.metadataText($0.metadata) }), .textArray(submissions.map { $0.idempotencyKey ?? "" }),
            .integerArray(submissions.map { $0.delay.milliseconds }), .integerArray(submissions.map { $0.timeout?.milliseconds }),
            .integerArray(submissions.map(\.priority), type: 1007), .integerArray(submissions.map(\.maxAttempts), type: 1007),
            .integerArray(offsets), .integerArray(lengths),
        ])
        guard rows.count == submissions.count else {
            throw PGError(.statementFailed, "posting \(submissions.count) commands returned \(rows.count) rows")
        }
        return try rows.all.map { row throws(PGError) in
            guard let id = row.uuid("id") else { throw PGError(.statementFailed, "posting '\(submissions[0].name)' and others returned no id") }
            return (id, row.bool("created") ?? true)
        }
    }
}

extension BusSubmission {
    /// Puts subcommands on the bus in one statement per ``batchPayloadBytes`` of payload
    /// (``BusSQL/submitSubcommands``), each as ``submit(on:)`` puts one: an id already on the bus
    /// is left as it is, and one that must fail at once if no host handles it does.
    /// - Throws: `statementFailed`, inserting nothing, if any submission has an ``unstorableReason``.
    package static func submitSubcommands(_ submissions: [BusSubmission], on connection: PGConnection) throws(PGError) {
        var start = 0
        while start < submissions.count {
            var end = start, bytes = 0
            while end < submissions.count && (end == start || bytes + submissions[end].payload.count <= batchPayloadBytes) {
                bytes += submissions[end].payload.count
                end += 1
            }
            try submitSubcommandsInOneStatement(submissions[start..<end], on: connection)
            start = end
        }
    }

    private static func submitSubcommandsInOneStatement(_ submissions: ArraySlice<BusSubmission>, on connection: PGConnection) throws(PGError) {
        precondition(submissions.allSatisfy { !$0.isProbe && $0.idempotencyKey == nil && $0.delay == .zero },
                     "submitSubcommands takes subcommands: no probe, key or delay")
        let (payloads, offsets, lengths) = try packed(submissions)
        try connection.execute(BusSQL.submitSubcommands, [
            .uuidArray(submissions.map(\.id)), .textArray(submissions.map(\.name)), .bytes(payloads),
            .textArray(submissions.map { PGValue.metadataText($0.metadata) }), .uuidArray(submissions.map(\.parentID)),
            .uuidArray(submissions.map(\.correlationID)), .integerArray(submissions.map(\.depth), type: 1007),
            .integerArray(submissions.map { $0.timeout?.milliseconds }), .integerArray(submissions.map(\.maxAttempts), type: 1007),
            .integerArray(offsets), .integerArray(lengths), .boolArray(submissions.map(\.failIfUnhandled)),
        ])
    }

    /// The payloads of `submissions` end to end, as a batch statement takes them in one `bytea`,
    /// with each one's offset and length in it.
    /// - Throws: `statementFailed` with the first ``unstorableReason``, if any cannot be kept as it is.
    private static func packed(_ submissions: some Collection<BusSubmission>) throws(PGError) -> (Data, offsets: [Int?], lengths: [Int?]) {
        var payloads = Data()
        var offsets: [Int?] = [], lengths: [Int?] = []
        for submission in submissions {
            if let reason = submission.unstorableReason { throw PGError(.statementFailed, reason) }
            offsets.append(payloads.count)
            lengths.append(submission.payload.count)
            payloads.append(submission.payload)
        }
        return (payloads, offsets, lengths)
    }
}
