/// Where a command is in its life: pending → running → succeeded | failed | cancelled | timedOut.
public enum CommandState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Accepted and waiting to run (for example, for a free concurrency slot).
    case pending
    /// A handler is working on it.
    case running
    /// The handler returned a result.
    case succeeded
    /// The handler threw, or no handler would take it.
    case failed
    /// It was cancelled before it finished.
    case cancelled
    /// It ran past its deadline.
    case timedOut

    /// Whether the command has finished and will not change state again.
    public var isTerminal: Bool {
        switch self {
        case .pending, .running: false
        case .succeeded, .failed, .cancelled, .timedOut: true
        }
    }

    /// Whether a command that ended so is a dead letter: failed, cancelled or timed out.
    package var isDeadLetter: Bool { self == .failed || self == .cancelled || self == .timedOut }
}
