/// A command together with its envelope, serialized as one value so it can be stored and replayed.
///
/// The JSON form is the envelope's fields plus `"payload"`, the command itself:
/// `{"id": "…", "command": "greet", "correlationId": "…", "createdAt": 1.7e9, "payload": {"name": "Ada"}}`.
public struct EnvelopedCommand<C: Command>: Sendable, Codable {
    /// The command's identity and routing facts.
    public var envelope: CommandEnvelope
    /// The command.
    public var command: C

    /// Pairs a command with its envelope.
    public init(envelope: CommandEnvelope, command: C) {
        self.envelope = envelope
        self.command = command
    }

    private enum CodingKeys: String, CodingKey { case payload }

    /// Decodes the envelope fields and the `payload`, refusing a payload stored under another command name.
    public init(from decoder: any Decoder) throws {
        envelope = try CommandEnvelope(from: decoder)
        guard envelope.commandName == C.name else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath,
                debugDescription: "stored command is '\(envelope.commandName)', expected '\(C.name)'"
            ))
        }
        command = try decoder.container(keyedBy: CodingKeys.self).decode(C.self, forKey: .payload)
    }

    /// Encodes the envelope fields and the command under `payload`.
    public func encode(to encoder: any Encoder) throws {
        try envelope.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(command, forKey: .payload)
    }
}
