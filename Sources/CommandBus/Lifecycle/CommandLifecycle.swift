/// The lifecycle state machine of one command.
///
/// It holds the current ``CommandState`` and accepts only the transitions the
/// lifecycle allows. A refused transition leaves the state unchanged, so a race
/// between, say, a timeout and a handler finishing is settled by whichever came first.
public struct CommandLifecycle: Sendable, Hashable {
    /// The current state.
    public private(set) var state: CommandState

    /// A transition the state machine refused.
    public struct InvalidTransition: Error, Sendable, Hashable, CustomStringConvertible {
        /// The state the command was in.
        public let from: CommandState
        /// The state that was asked for.
        public let to: CommandState

        /// Describes a refused move from `from` to `to`.
        public init(from: CommandState, to: CommandState) {
            self.from = from
            self.to = to
        }
        /// `invalid lifecycle transition succeeded → running`.
        public var description: String { "invalid lifecycle transition \(from.rawValue) → \(to.rawValue)" }
    }

    /// Starts a lifecycle, in `pending` by default.
    public init(state: CommandState = .pending) {
        self.state = state
    }

    /// Whether the lifecycle allows moving from `from` to `to`.
    public static func allows(from: CommandState, to: CommandState) -> Bool {
        switch (from, to) {
        case (.pending, .running), (.pending, .failed), (.pending, .cancelled), (.pending, .timedOut):
            true
        case (.running, .succeeded), (.running, .failed), (.running, .cancelled), (.running, .timedOut):
            true
        default:
            false
        }
    }

    /// Moves to `next`, or throws and stays put when the lifecycle forbids it.
    /// - Returns: The state that was left.
    @discardableResult
    public mutating func transition(to next: CommandState) throws(InvalidTransition) -> CommandState {
        let previous = state
        guard Self.allows(from: previous, to: next) else {
            throw InvalidTransition(from: previous, to: next)
        }
        state = next
        return previous
    }
}
