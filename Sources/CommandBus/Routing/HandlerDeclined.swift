/// Thrown by a ``DynamicCommandHandler``'s `handle` to say it will not take this command after
/// all: the bus passes the command on to the next handler in chain-of-responsibility order, as
/// if `canHandle` had said no, and the sender sees only the handler that took it.
///
/// This lets a handler whose answer is expensive to get (one in another process, where asking
/// costs a round trip) say yes in ``DynamicCommandHandler/canHandle(payload:)`` and decide in
/// `handle`, in the same round trip as the work. Nothing must have happened yet when a handler
/// declines: no events, subcommands or side effects.
public struct HandlerDeclined: Error, Sendable {
    /// Creates the error.
    public init() {}
}
