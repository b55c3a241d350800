#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Routes commands to handlers, runs them off the caller's task, and reports their lifecycle.
///
/// ```swift
/// let bus = CommandBus()
/// bus.register(GreetHandler())
/// let greeting = try await bus.send(Greet(name: "Ada"))
/// ```
///
/// Each command runs exactly one handler: the highest-priority registered handler
/// for its name whose `canHandle` says yes. Commands can be sent as Swift values or,
/// through the dynamic path, as a name plus JSON bytes; both reach the same handlers.
public final class CommandBus: Sendable {
    /// How this bus schedules and wraps work.
    public let configuration: CommandBusConfiguration
    let routes = Mutex(RouteTable())
    let events = EventBroadcaster()
    let busLimiter: ConcurrencyLimiter?
    let observers = Mutex<[any CommandObserver]>([])
    /// How many observers there are, read without the lock on the dispatch path.
    let observerCount = Atomic<Int>(0)
    private let nextRegistrationID = Atomic<Int>(0)
    /// The configuration's fallback handler, as a route entry.
    let fallbackEntry: RouteEntry?
    /// The runner tasks posted root commands run on.
    let postRunners = PostRunners()
    /// Whether the configuration has a journal: asked on every send, where reading the optional
    /// existential copied it (a retain) and destroyed it again.
    let hasJournal: Bool
    /// Whether that journal takes a posted command's write-ahead as it is posted (``Journal/queuesWriteAheads``).
    let journalQueuesWriteAheads: Bool

    /// Creates a bus.
    /// - Parameter configuration: Concurrency limit, default deadline and middleware.
    public init(configuration: CommandBusConfiguration = .init()) {
        self.configuration = configuration
        self.hasJournal = configuration.journal != nil
        self.journalQueuesWriteAheads = configuration.journal?.queuesWriteAheads ?? false
        self.busLimiter = configuration.maxConcurrentCommands.map { ConcurrencyLimiter(limit: $0) }
        self.fallbackEntry = configuration.fallback.map { handler in
            RouteEntry(registrationID: -1, priority: .min, box: DynamicHandlerBox(handler: handler), limiter: nil)
        }
    }

    deinit {
        // Parked runners hold the pool, not the bus; without this they would wait for posts forever.
        postRunners.shutDown()
    }

    // MARK: Registration

    /// Registers a typed handler for its command's name. The JSON path reaches it too.
    /// - Parameters:
    ///   - handler: The handler.
    ///   - priority: Higher priorities are asked first; ties go to the earlier registration.
    /// - Returns: The registration; cancel it to take the handler off the bus.
    @discardableResult @inlinable
    public func register<H: CommandHandler>(_ handler: H, priority: Int = 0) -> HandlerRegistration {
        // `@inlinable`, so these closures are compiled in the registering module for `H`: running a
        // command calls the handler with its command and result in the closure's own frame,
        // where a box generic over `H` would allocate both at run time, and asking a handler that
        // keeps the default `canHandle` costs a type comparison.
        registerTyped(
            handler, priority: priority,
            canHandle: { handler, prepared throws(CommandBusError) in handler.canHandle(try prepared.command(as: H.HandledCommand.self)) },
            handle: { handler, prepared, context in
                CommandOutput(try await handler.handle(try prepared.command(as: H.HandledCommand.self), context: context))
            }
        )
    }

    /// Registers a typed handler with the closures that ask and run it, made where `H` is known.
    @usableFromInline
    func registerTyped<H: CommandHandler>(
        _ handler: H, priority: Int,
        canHandle: @escaping @Sendable (H, CommandPayload) throws(CommandBusError) -> Bool,
        handle: @escaping @Sendable (H, CommandPayload, CommandContext) async throws -> CommandOutput
    ) -> HandlerRegistration {
        let box = TypedHandlerBox(handler: handler, canHandleCommand: canHandle, handleCommand: handle)
        return register(box, name: H.HandledCommand.name, priority: priority)
    }

    /// Registers a handler that takes its command as JSON bytes.
    /// - Parameters:
    ///   - handler: The handler.
    ///   - priority: Higher priorities are asked first; ties go to the earlier registration.
    /// - Returns: The registration; cancel it to take the handler off the bus.
    @discardableResult
    public func register(_ handler: some DynamicCommandHandler, priority: Int = 0) -> HandlerRegistration {
        register(DynamicHandlerBox(handler: handler), name: handler.commandName, priority: priority)
    }

    private func register(_ box: any HandlerBox, name: String, priority: Int) -> HandlerRegistration {
        let id = nextRegistrationID.add(1, ordering: .relaxed).newValue
        let entry = RouteEntry(
            registrationID: id, priority: priority, box: box,
            limiter: box.maxConcurrency.map { ConcurrencyLimiter(limit: $0) }
        )
        routes.withLock { $0.insert(entry, for: name) }
        return HandlerRegistration(commandName: name, priority: priority) { [weak self] in
            self?.routes.withLock { $0.remove(registrationID: id, for: name) }
        }
    }

    /// The names of every command that has at least one handler.
    public var commandNames: [String] { routes.withLock { $0.commandNames }.sorted() }

    /// How many handlers are registered for `name`.
    public func handlerCount(for name: String) -> Int {
        routes.withLock { $0.handlers(for: name).count }
    }

    // MARK: Typed commands

    /// Sends a command, waits for the one handler that takes it, and returns its result.
    ///
    /// Cancelling the calling task cancels the command. Routing happens on the caller's executor;
    /// the handler never does: it runs on the global executor, inside the caller's task.
    /// - Parameters:
    ///   - command: The command.
    ///   - metadata: String metadata for the envelope.
    ///   - timeout: A deadline, after which the command ends `timedOut`; the configuration's default if `nil`.
    /// - Throws: ``CommandBusError``: `noHandler`, `handlerFailed`, `cancelled`, `timedOut`, …
    @inlinable
    public nonisolated(nonsending) func send<C: Command>(
        _ command: C, metadata: [String: String] = [:], timeout: Duration? = nil
    ) async throws(CommandBusError) -> C.Result {
        // `@inlinable`, so the sender's module specializes it for `C`: no generic metadata is
        // looked up at run time (148 of a send's 7,290 instructions under callgrind).
        try await sendOnCallersTask(.typed(command), name: C.name, metadata: metadata, timeout: timeout)
            .value(as: C.Result.self, commandName: C.name)
    }

    /// Sends a command without waiting; the ticket tracks it.
    ///
    /// If no handler would take it, the ticket's result throws `noHandler`.
    public func post<C: Command>(
        _ command: C, metadata: [String: String] = [:], timeout: Duration? = nil
    ) -> CommandTicket<C.Result> {
        CommandTicket(post(.typed(command), name: C.name, parent: nil, metadata: metadata, timeout: timeout))
    }

    /// Whether some handler would take `command` now. Nothing runs.
    public func canHandle<C: Command>(_ command: C) -> Bool {
        (try? route(.typed(command), name: C.name)) != nil
    }

    // MARK: Events

    /// The events of commands on this bus, from now on: lifecycle transitions, progress, emitted events and logs.
    /// - Parameters:
    ///   - filter: Which commands' events to deliver.
    ///   - bufferingPolicy: What to keep when the consumer falls behind; everything by default.
    public func events(
        matching filter: EventFilter = .all,
        bufferingPolicy: AsyncStream<CommandEvent>.Continuation.BufferingPolicy = .unbounded
    ) -> AsyncStream<CommandEvent> {
        events.subscribe(filter, bufferingPolicy: bufferingPolicy)
    }

    /// Ends every event stream: iterators get the events already buffered, then `nil`.
    ///
    /// A one-shot tool calls this once its work is done, so printers can drain and stop.
    public func finishEventStreams() {
        events.finishAll()
    }

    /// Adds an observer that is told synchronously about every command the bus accepts and finishes.
    public func addObserver(_ observer: any CommandObserver) {
        observers.withLock { $0.append(observer) }
        observerCount.add(1, ordering: .releasing)
    }

    /// - Parameter isLog: The event is a handler's log line, which ``EventFilter/logs`` subscribers take too.
    func publish(_ context: CommandContext, isLog: Bool = false, _ kind: () -> CommandEvent.Kind) {
        guard isLog ? events.hasSubscribers : events.hasBroadSubscribers else { return }
        events.publish(CommandEvent(envelope: context.envelope, kind: kind()))
    }
}
