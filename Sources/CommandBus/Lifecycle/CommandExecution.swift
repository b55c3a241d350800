/// The mutable part of one command's run, kept under its context's lock.
struct CommandExecution: Sendable {
    typealias Outcome = Result<CommandOutput, CommandBusError>

    var lifecycle = CommandLifecycle()
    var outcome: Outcome?
    var waiters: [UnsafeContinuation<Outcome, Never>] = []
    /// Callers told of the end without a task waiting (``CommandTicket/whenFinished(_:)``).
    var callbacks: [@Sendable (Outcome) -> Void] = []
    /// The journal has the command's write-ahead; and who waits to hear so (``CommandTicket/whenWrittenAhead(_:)``).
    var writtenAhead = false
    var writtenAheadCallbacks: [@Sendable (Result<Void, CommandBusError>) -> Void] = []
    var task: Task<Outcome, Never>?
    /// The runner a posted root command runs on (``PostRunners``), while it runs.
    var runner: PostRunner?
    var watchdog: Task<Void, Never>?
    var cancelRequested = false
    /// Someone awaited the result, so a failure has been seen.
    var observed = false
    var children: [CommandContext] = []
    var childrenFinished = 0
    /// Whether the handler reports its own progress, which then replaces the count of finished children.
    var reportsProgress = false
    var attempts = 0
}
