/// Told synchronously, on the bus's own threads, when a command is accepted and when it finishes.
///
/// Keep the methods quick: they run on the dispatch path. Statistics and journals are typical observers.
/// ```swift
/// final class FinishedCounter: CommandObserver {
///     let count = Atomic<Int>(0)
///     func commandFinished(_ envelope: CommandEnvelope, state: CommandState, error: CommandBusError?) {
///         count.add(1, ordering: .relaxed)
///     }
/// }
/// ```
public protocol CommandObserver: Sendable {
    /// A command was accepted and is now pending.
    func commandAccepted(_ envelope: CommandEnvelope)
    /// A command reached a terminal state; `error` is set unless it succeeded.
    func commandFinished(_ envelope: CommandEnvelope, state: CommandState, error: CommandBusError?)
}

extension CommandObserver {
    /// Does nothing by default.
    public func commandAccepted(_ envelope: CommandEnvelope) {}
    /// Does nothing by default.
    public func commandFinished(_ envelope: CommandEnvelope, state: CommandState, error: CommandBusError?) {}
}
