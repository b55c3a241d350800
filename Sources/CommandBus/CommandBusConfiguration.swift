/// How a ``CommandBus`` schedules and wraps work.
public struct CommandBusConfiguration: Sendable {
    /// The most top-level commands that may run at once; `nil` means no limit.
    ///
    /// Subcommands run inside their parent's slot and do not count, so a parent
    /// waiting for its children can never starve them.
    public var maxConcurrentCommands: Int?
    /// The deadline for commands sent without a timeout of their own; `nil` means none.
    public var defaultTimeout: Duration?
    /// The middleware that wraps every dispatch, outermost first.
    public var middleware: [any CommandMiddleware]
    /// Where commands are written ahead before they run; `nil` keeps nothing.
    public var journal: (any Journal)?
    /// The largest JSON payload the dynamic path accepts, in bytes; `nil` means no limit.
    public var maxPayloadBytes: Int?
    /// How many levels of subcommands a tree of work may have below its root (100 unless set): a
    /// subcommand past it is refused with `tooDeep`. A handler that sends itself without end
    /// would otherwise hold a task per level until the process runs out of memory.
    public var maxSubcommandDepth = 100
    /// Asked for a command after every registered handler for its name declined, or when none is
    /// registered: a bus that forwards what it cannot run to other hosts. Its `commandName` is unused.
    public var fallback: (any DynamicCommandHandler)?

    /// Creates a configuration; the defaults are no limit, no deadline, no middleware and no journal.
    public init(
        maxConcurrentCommands: Int? = nil,
        defaultTimeout: Duration? = nil,
        middleware: [any CommandMiddleware] = [],
        journal: (any Journal)? = nil,
        maxPayloadBytes: Int? = nil,
        fallback: (any DynamicCommandHandler)? = nil
    ) {
        self.fallback = fallback
        self.maxPayloadBytes = maxPayloadBytes
        self.maxConcurrentCommands = maxConcurrentCommands
        self.defaultTimeout = defaultTimeout
        self.middleware = middleware
        self.journal = journal
    }
}
