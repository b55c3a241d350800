#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One command as a journal holds it: its envelope and payload, and how it ended (so far).
public struct JournalRecord: Sendable, Hashable {
    /// The journal's own order: the order commands were first accepted in.
    public var sequence: Int64
    /// The command's envelope; its id is the idempotency key.
    public var envelope: CommandEnvelope
    /// The command's JSON payload.
    public var payload: Data
    /// The last recorded lifecycle state.
    public var state: CommandState
    /// How many times a handler was called for it, over every run.
    public var attempts: Int
    /// The JSON result, if it succeeded.
    public var result: Data?
    /// The error code and message, if it failed, was cancelled or timed out.
    public var errorCode: String?
    /// The one-line error message, if it did not succeed.
    public var errorMessage: String?
    /// When the last transition was recorded.
    public var updatedAt: Date
    /// The command this one undid, if it is an undo.
    public var undoOf: UUID?
    /// The command that undid this one, if any.
    public var undoneBy: UUID?
    /// Whether the record was taken out of replay (`journal undo --rebuild`).
    public var excluded: Bool
    /// When a handler last started it, if one did.
    public var startedAt: Date?
    /// When it last ended, if it has.
    public var finishedAt: Date?
    /// When an operator discarded it as a dead letter (it stays in the journal, out of the dead-letter list).
    public var discardedAt: Date?

    /// Creates a record; journals fill in the rest as the command runs.
    public init(
        sequence: Int64, envelope: CommandEnvelope, payload: Data, state: CommandState = .pending,
        attempts: Int = 0, result: Data? = nil, errorCode: String? = nil, errorMessage: String? = nil,
        updatedAt: Date = Date(), undoOf: UUID? = nil, undoneBy: UUID? = nil, excluded: Bool = false,
        startedAt: Date? = nil, finishedAt: Date? = nil, discardedAt: Date? = nil
    ) {
        self.sequence = sequence
        self.envelope = envelope
        self.payload = payload
        self.state = state
        self.attempts = attempts
        self.result = result
        self.errorCode = errorCode
        self.errorMessage = errorMessage
        self.updatedAt = updatedAt
        self.undoOf = undoOf
        self.undoneBy = undoneBy
        self.excluded = excluded
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.discardedAt = discardedAt
    }
}

/// A change to a journaled command's record.
public struct JournalUpdate: Sendable, Hashable {
    /// The command.
    public var id: UUID
    /// Its new state.
    public var state: CommandState
    /// The handler calls so far in this run.
    public var attempts: Int
    /// The JSON result, for `succeeded`.
    public var result: Data?
    /// The error, for the other terminal states.
    public var errorCode: String?
    /// The error's message.
    public var errorMessage: String?
    /// When the transition happened.
    public var at: Date

    /// Describes a transition of command `id` to `state`.
    public init(id: UUID, state: CommandState, attempts: Int, result: Data? = nil, error: CommandBusError? = nil, at: Date = Date()) {
        self.id = id
        self.state = state
        self.attempts = attempts
        self.result = result
        self.errorCode = error?.code.description
        self.errorMessage = error?.message
        self.at = at
    }
}

/// Which records to list.
public struct JournalQuery: Sendable, Hashable {
    /// Only records in these states; all states if empty.
    public var states: Set<CommandState>
    /// Only records of this command name.
    public var commandName: String?
    /// Only records after this sequence number.
    public var afterSequence: Int64?
    /// Only records up to and including this sequence number.
    public var throughSequence: Int64?
    /// Only the commands of this tree of work (a root's id is its tree's correlation id).
    public var correlationID: UUID?
    /// Only commands created at or after this time.
    public var createdSince: Date?
    /// At most this many, oldest first (newest first with `newestFirst`); no limit if `nil`.
    public var limit: Int?
    /// List the newest first, so `limit` keeps the latest.
    public var newestFirst: Bool

    /// Creates a query; the defaults match every record.
    public init(
        states: Set<CommandState> = [], commandName: String? = nil,
        afterSequence: Int64? = nil, throughSequence: Int64? = nil, limit: Int? = nil,
        correlationID: UUID? = nil, newestFirst: Bool = false, createdSince: Date? = nil
    ) {
        self.states = states
        self.commandName = commandName
        self.afterSequence = afterSequence
        self.throughSequence = throughSequence
        self.limit = limit
        self.correlationID = correlationID
        self.newestFirst = newestFirst
        self.createdSince = createdSince
    }

    /// Whether `record` matches.
    public func matches(_ record: JournalRecord) -> Bool {
        (states.isEmpty || states.contains(record.state))
            && (commandName == nil || record.envelope.commandName == commandName)
            && (afterSequence.map { record.sequence > $0 } ?? true)
            && (throughSequence.map { record.sequence <= $0 } ?? true)
            && (correlationID.map { record.envelope.correlationID == $0 } ?? true)
            && (createdSince.map { record.envelope.createdAt >= $0 } ?? true)
    }
}
