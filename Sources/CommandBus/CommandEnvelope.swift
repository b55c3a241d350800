#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The identity and routing facts that travel with every command the bus sends.
///
/// The bus wraps each command in an envelope. Subcommands carry their parent's
/// ``id`` in ``parentID`` and share the root's ``correlationID``, so a whole tree
/// of work can be followed and journaled.
public struct CommandEnvelope: Sendable, Hashable, Codable {
    /// The command's unique id; the journal uses it as the idempotency key.
    public var id: UUID
    /// The routing name of the command inside this envelope.
    public var commandName: String
    /// The id of the command whose handler sent this one, if it is a subcommand.
    public var parentID: UUID?
    /// The id shared by every command in one tree of work (the root's id by default).
    public var correlationID: UUID
    /// When the command was created.
    public var createdAt: Date
    /// Free-form string metadata (a user id, a trace id, a source).
    public var metadata: [String: String]
    /// How many levels below its root the command is: 0 for a root, its parent's plus one for a
    /// subcommand. It travels with the envelope, so a tree that crosses hosts keeps its count
    /// (see ``CommandBusConfiguration/maxSubcommandDepth``).
    public var depth: Int

    /// Creates an envelope for a root command or, with `parent`, for a subcommand.
    /// - Parameters:
    ///   - commandName: The routing name of the command.
    ///   - id: The command's id; a new time-ordered UUID (``CommandID``) by default.
    ///   - parent: The parent's envelope for a subcommand; its id and correlation id are inherited.
    ///   - metadata: String metadata; a subcommand inherits its parent's and adds these on top.
    ///   - createdAt: The creation time; now by default.
    public init(
        commandName: String,
        id: UUID? = nil,
        parent: CommandEnvelope? = nil,
        metadata: [String: String] = [:],
        createdAt: Date = Date()
    ) {
        let id = id ?? CommandID.make(now: createdAt)
        self.id = id
        self.commandName = commandName
        self.parentID = parent?.id
        self.correlationID = parent?.correlationID ?? id
        self.depth = parent.map { $0.depth + 1 } ?? 0
        self.createdAt = createdAt
        if let inherited = parent?.metadata, !inherited.isEmpty {
            self.metadata = inherited.merging(metadata) { _, new in new }
        } else {
            self.metadata = metadata
        }
    }

    private enum CodingKeys: String, CodingKey {
        case id, commandName = "command", parentID = "parentId", correlationID = "correlationId", createdAt, metadata, depth
    }

    /// Decodes an envelope; `createdAt` is seconds since 1970, whatever the decoder's date strategy,
    /// and a missing `depth` is a root's.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(UUID.self, forKey: .id)
        commandName = try container.decode(String.self, forKey: .commandName)
        parentID = try container.decodeIfPresent(UUID.self, forKey: .parentID)
        correlationID = try container.decodeIfPresent(UUID.self, forKey: .correlationID) ?? id
        let seconds = try container.decode(Double.self, forKey: .createdAt)
        createdAt = Date(timeIntervalSince1970: seconds)
        metadata = try container.decodeIfPresent([String: String].self, forKey: .metadata) ?? [:]
        depth = try container.decodeIfPresent(Int.self, forKey: .depth) ?? 0
    }

    /// Encodes the envelope with `createdAt` as seconds since 1970 (and `depth` only below a root).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(commandName, forKey: .commandName)
        try container.encodeIfPresent(parentID, forKey: .parentID)
        try container.encode(correlationID, forKey: .correlationID)
        try container.encode(createdAt.timeIntervalSince1970, forKey: .createdAt)
        if !metadata.isEmpty { try container.encode(metadata, forKey: .metadata) }
        if depth != 0 { try container.encode(depth, forKey: .depth) }
    }
}
