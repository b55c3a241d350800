#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Something that happened to a command: a lifecycle transition, progress, or an event its handler emitted.
public struct CommandEvent: Sendable, Hashable, Codable {
    /// What kind of event this is.
    public enum Kind: Sendable, Hashable, Codable {
        /// The bus accepted the command; it is pending.
        case accepted
        /// The command moved from one lifecycle state to another.
        case stateChanged(from: CommandState, to: CommandState)
        /// Of the subcommands this command sent, `completed` out of `total` have finished.
        case progress(completed: Int, total: Int)
        /// The handler emitted an event: a name and JSON bytes.
        case emitted(name: String, payload: Data)
        /// The handler logged a line.
        case log(level: LogLevel, message: String)
    }

    /// The envelope of the command the event is about.
    public let envelope: CommandEnvelope
    /// What happened.
    public let kind: Kind
    /// When it happened.
    public let timestamp: Date

    /// Creates an event about the command in `envelope`.
    public init(envelope: CommandEnvelope, kind: Kind, timestamp: Date = Date()) {
        self.envelope = envelope
        self.kind = kind
        self.timestamp = timestamp
    }

    /// The id of the command the event is about.
    public var commandID: UUID { envelope.id }
    /// The correlation id of the tree the command belongs to.
    public var correlationID: UUID { envelope.correlationID }
}

/// The severity of a log line a handler writes through its context.
public enum LogLevel: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    /// Detailed tracing.
    case debug
    /// Normal operation.
    case info
    /// Something unexpected that the command survived.
    case warning
    /// Something failed.
    case error

    private var rank: Int { Self.allCases.firstIndex(of: self)! }

    /// Orders levels from `debug` to `error`.
    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
}

/// Which events a subscriber receives.
public enum EventFilter: Sendable, Hashable {
    /// Every event on the bus.
    case all
    /// Events about one command.
    case command(UUID)
    /// Events about every command in one tree of work.
    case correlation(UUID)
    /// The lines handlers write with their context's `log`, from every command. A bus whose
    /// only subscribers take these builds no other event.
    case logs

    /// Whether `event` passes the filter.
    public func matches(_ event: CommandEvent) -> Bool {
        switch self {
        case .all: true
        case .command(let id): event.envelope.id == id
        case .correlation(let id): event.envelope.correlationID == id
        case .logs: if case .log = event.kind { true } else { false }
        }
    }
}
