/// The mutable part of one command's run, kept under its context's lock.
struct CommandExecution: Sendable {
    typealias Outcome = Result<CommandOutput, CommandBusError>

    var lifecycle = CommandLifecycle()
    var outcome: Outcome?
    /// Whether those who wait may take ``outcome``: at once for a root command; for a subcommand,
    /// once its parent has counted it (and published its progress), so the parent cannot end
    /// before that, and skip it, as it did when it took the outcome the moment it was set.
    var settled = false
    var waiters: [UnsafeContinuation<Outcome, Never>] = []
    /// Callers told of the end without a task waiting (``CommandTicket/whenFinished(_:)``).
    var callbacks: [@Sendable (Outcome) -> Void] = []
    /// Whether the journal has the command's write-ahead, and who waits to hear so
    /// (``CommandTicket/whenWrittenAhead(_:)``).
    var writeAhead = WriteAhead.notWritten
    var task: Task<Outcome, Never>?
    /// The runner a posted root command runs on (``PostRunners``), while it runs.
    var runner: PostRunner?
    var watchdog: Task<Void, Never>?
    var cancelRequested = false
    /// Someone awaited the result, so a failure has been seen.
    var observed = false
    /// The subcommands sent, until this command's end drops them (each holds this one as its parent).
    var children: [CommandContext] = []
    var childrenFinished = 0
    /// Whether the handler reports its own progress, which then replaces the count of finished children.
    var reportsProgress = false
    var attempts = 0
}

/// Whether the journal has a command's write-ahead (``CommandExecution/writeAhead``). One field,
/// not a flag and a list: only a server's posts ever wait here, and a command that nobody waits
/// for pays nothing to start the list or to drop it when it ends.
enum WriteAhead: Sendable {
    case notWritten
    /// Not written yet; these wait to hear.
    case awaited([@Sendable (Result<Void, CommandBusError>) -> Void])
    case written

    /// Adds `body` to those who wait to hear (unless already written: then nothing).
    mutating func add(_ body: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        switch self {
        case .notWritten: self = .awaited([body])
        case .awaited(var callbacks):
            self = .notWritten  // the list's one reference, so the append does not copy it
            callbacks.append(body)
            self = .awaited(callbacks)
        case .written: break
        }
    }
}
