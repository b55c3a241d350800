import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One row of `cmdbus.commands`, as read back.
package struct BusCommandRow: Sendable {
    package var id: UUID
    package var sequence: Int64
    package var name: String
    package var payload: Data
    package var metadata: [String: String]
    package var parentID: UUID?
    package var correlationID: UUID
    /// How far below its root it is.
    package var depth: Int
    package var isProbe: Bool
    package var state: CommandState
    package var attempt: Int
    package var maxAttempts: Int
    package var timeout: Duration?
    package var createdAt: Date
    package var finalizedAt: Date?
    package var cancelRequested: Bool
    package var result: Data?
    package var errorCode: String?
    package var errorMessage: String?
    package var leaseOwner: UUID?
    package var undoOf: UUID?
    package var undoneBy: UUID?
    /// The hosts that ran it, one entry per attempt.
    package var attemptedBy: [String]

    init?(_ row: PGRow) {
        guard let id = row.uuid("id"), let name = row.text("name"), let correlation = row.uuid("correlation_id"),
              let stateName = row.text("state"), let state = CommandState(rawValue: stateName) else { return nil }
        self.id = id
        sequence = row.integer("seq") ?? 0
        self.name = name
        payload = row.bytes("payload") ?? Data()
        metadata = row.text("metadata").map(Self.metadata(fromJSON:)) ?? [:]
        parentID = row.uuid("parent_id")
        correlationID = correlation
        depth = Int(row.integer("depth") ?? 0)
        isProbe = row.text("kind") == "probe"
        self.state = state
        attempt = Int(row.integer("attempt") ?? 0)
        maxAttempts = Int(row.integer("max_attempts") ?? 1)
        timeout = row.integer("timeout_ms").map { .milliseconds($0) }
        createdAt = row.date("created_at") ?? Date()
        finalizedAt = row.date("finalized_at")
        cancelRequested = row.bool("cancel_requested") ?? false
        result = row.bytes("result")
        errorCode = row.text("error_code")
        errorMessage = row.text("error_message")
        leaseOwner = row.uuid("lease_owner")
        undoOf = row.uuid("undo_of")
        undoneBy = row.uuid("undone_by")
        attemptedBy = (row.text("attempted_by") ?? "").split(separator: ",").map(String.init)
    }

    /// Whether it has reached a final state.
    package var isFinal: Bool { finalizedAt != nil }

    /// The envelope it runs under: its id stays the idempotency key on every host and attempt.
    package var envelope: CommandEnvelope {
        var envelope = CommandEnvelope(commandName: name, id: id, metadata: metadata, createdAt: createdAt)
        envelope.parentID = parentID
        envelope.correlationID = correlationID
        envelope.depth = depth
        return envelope
    }

    /// The row as the journal commands show it.
    package var record: JournalRecord {
        JournalRecord(
            sequence: sequence, envelope: envelope, payload: payload, state: state, attempts: attempt, result: result,
            errorCode: errorCode, errorMessage: errorMessage, updatedAt: finalizedAt ?? createdAt, undoOf: undoOf, undoneBy: undoneBy,
            finishedAt: finalizedAt
        )
    }
}

extension BusCommandRow {
    /// The metadata column's JSON text (`{}` for most commands) as the envelope's strings;
    /// none if it is not an object of strings, which the bus never writes. Read with the
    /// project's parser: Foundation's `JSONDecoder` took 3% of a host's time running trees of
    /// subcommands, on the result waiter's thread, for the `{}` of every command that ended.
    static func metadata(fromJSON text: String) -> [String: String] {
        guard text != "{}", case .object(let fields)? = JSONValue.parse(text) else { return [:] }
        var strings: [String: String] = [:]
        for (key, value) in fields {
            guard case .string(let string) = value else { return [:] }
            strings[key] = string
        }
        return strings
    }
}
