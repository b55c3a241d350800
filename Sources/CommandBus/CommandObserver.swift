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
    /// A command reached a terminal state `duration` after it was accepted (zero if it was accepted
    /// before the bus had any observer). The bus calls this one; by default it calls
    /// ``commandFinished(_:state:error:)``. An observer that times commands takes the duration
    /// here rather than keeping a start time per command under a lock of its own.
    func commandFinished(_ envelope: CommandEnvelope, state: CommandState, error: CommandBusError?, after duration: Duration)
}

extension CommandObserver {
    /// Does nothing by default.
    public func commandAccepted(_ envelope: CommandEnvelope) {}
    /// Does nothing by default.
    public func commandFinished(_ envelope: CommandEnvelope, state: CommandState, error: CommandBusError?) {}
    /// Calls ``commandFinished(_:state:error:)``.
    public func commandFinished(_ envelope: CommandEnvelope, state: CommandState, error: CommandBusError?, after duration: Duration) {
        commandFinished(envelope, state: state, error: error)
    }
}
