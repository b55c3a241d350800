import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One command to put on the shared bus.
package struct BusSubmission: Sendable {
    package var id: UUID
    package var name: String
    package var payload: Data
    package var metadata: [String: String] = [:]
    package var parentID: UUID?
    package var correlationID: UUID
    /// How far below its root it is (``CommandEnvelope/depth``).
    package var depth = 0
    /// Submitting the same key again returns the first command's id; it never runs twice.
    package var idempotencyKey: String?
    package var isProbe = false
    package var priority = 0
    package var delay: Duration = .zero
    package var timeout: Duration?
    package var maxAttempts = 5
    /// End `noHandler` at once if no live host handles the name (a `send`); a `post` waits for one.
    package var failIfUnhandled = true

    /// A new root command.
    package init(name: String, payload: Data, metadata: [String: String] = [:], id: UUID = CommandID.make()) {
        self.id = id
        self.name = name
        self.payload = payload
        self.metadata = metadata
        correlationID = id
        idempotencyKey = metadata["idempotency-key"]
    }

    /// A subcommand under `envelope`'s parent, with `envelope`'s own id.
    package init(child envelope: CommandEnvelope, payload: Data) {
        id = envelope.id
        name = envelope.commandName
        self.payload = payload
        metadata = envelope.metadata
        parentID = envelope.parentID
        correlationID = envelope.correlationID
        depth = envelope.depth
    }

    /// The priority of a `can`'s probe: above any command's, so it is claimed before the commands
    /// that wait (it only asks, and takes no slot), and a host whose handlers of a name are all busy
    /// reads only the claim index's first rows to find it.
    package static let probePriority = Int(Int32.max)

    /// Why PostgreSQL could not keep this command as it is, if it could not: a `text` column
    /// holds no NUL character, and a name, key or metadata with one would be cut short there
    /// (a payload, which is `bytea`, takes any byte).
    package var unstorableReason: String? {
        let texts = [name] + metadata.keys + metadata.values + [idempotencyKey ?? ""]
        guard texts.contains(where: { $0.utf8.contains(0) }) else { return nil }
        return "command \(quoted(name)) has a NUL character (\\u0000) in its name or metadata, which the shared bus cannot keep; remove it"
    }

    /// Inserts the command and notifies the hosts, in one transaction (one statement).
    /// - Throws: `statementFailed` with ``unstorableReason``, inserting nothing, if the command cannot be kept as it is.
    /// - Returns: The id it runs under (the first command's, for a key seen before) and whether it is new.
    @discardableResult
    package func submit(on connection: PGConnection) throws(PGError) -> (id: UUID, created: Bool) {
        if let reason = unstorableReason { throw PGError(.statementFailed, reason) }
        let rows = try connection.execute(BusSQL.submit, [
            .uuid(id), .text(name), .bytes(payload), .metadata(metadata), parentID.map(PGValue.uuid), .uuid(correlationID),
            idempotencyKey.map(PGValue.text), .text(isProbe ? "probe" : "command"), .integer(isProbe ? Self.probePriority : priority),
            .integer(delay.milliseconds),
            timeout.map { .integer($0.milliseconds) }, .integer(maxAttempts), .bool(failIfUnhandled), .integer(Int64(depth)),
        ])
        guard rows.count > 0, let id = rows[row: 0].uuid("id") else {
            throw PGError(.statementFailed, "submitting '\(name)' returned no id")
        }
        return (id, rows[row: 0].bool("created") ?? true)
    }
}
