#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// What a handler gets besides its command: the envelope, events, logging, and subcommands.
///
/// The bus makes one context per command; it also records that command's lifecycle.
/// ```swift
/// func handle(_ command: GreetAll, context: CommandContext) async throws -> [String] {
///     var greetings: [String] = []
///     for name in command.names {
///         greetings.append(try await context.send(Greet(name: name)).greeting)
///     }
///     return greetings
/// }
/// ```
public final class CommandContext: Sendable {
    /// The envelope of the command being handled.
    public let envelope: CommandEnvelope
    let bus: CommandBus
    let parent: CommandContext?
    let timeout: Duration?
    /// The handler chosen for the command and the payload in the form it takes; `nil` if routing failed.
    let assignment: HandlerAssignment?
    /// Whether the command is written ahead to the bus's journal. A flag, not the journal: the
    /// only journal a command is written to is its bus's, and a context is kept as long as its
    /// ticket, so every byte of it counts a million times over in a burst of posts.
    let isJournaled: Bool
    /// Whether the command was written ahead as it was posted, before it was queued for a
    /// runner (``Journal/queuesWriteAheads``), so ``run()`` does not write it again.
    let isWrittenAheadOnPost: Bool
    let execution = Mutex(CommandExecution())
    /// How many subcommands were sent, readable without the lock.
    let childCount = Atomic<Int>(0)
    /// When the command was accepted, if the bus had observers to tell how long it took.
    let acceptedAt: ContinuousClock.Instant?

    /// Makes the context of a command the bus has routed (or failed to route: no `assignment`).
    ///
    /// Never inlined: inlined into `send`'s async frame, the optional instant it notes (of a size
    /// known only at run time) took an allocation in the caller's task on every send (6,454 -> 6,392).
    /// - Parameter timesAcceptance: Note when the command was accepted (``acceptedAt``), for observers.
    @inline(never)
    init(
        envelope: CommandEnvelope, bus: CommandBus, parent: CommandContext?, timeout: Duration?,
        assignment: consuming HandlerAssignment?, journaled: Bool, writtenAheadOnPost: Bool = false,
        timesAcceptance: Bool = false
    ) {
        self.acceptedAt = timesAcceptance ? .now : nil
        self.envelope = envelope
        self.bus = bus
        self.parent = parent
        self.timeout = timeout
        self.assignment = assignment
        self.isJournaled = journaled
        self.isWrittenAheadOnPost = journaled && writtenAheadOnPost
    }

    /// Where the command is written ahead; `nil` if it is not journaled.
    var journal: (any Journal)? { isJournaled ? bus.configuration.journal : nil }

    /// The command's current lifecycle state.
    public var state: CommandState { execution.withLock { $0.lifecycle.state } }

    /// Whether the command has been cancelled or has timed out; handlers should stop soon when it is.
    public var isCancelled: Bool {
        execution.withLock { $0.cancelRequested || $0.lifecycle.state.isTerminal } || Task.isCancelled
    }

    /// Emits an event with a name and JSON bytes to everyone observing this command.
    public func emit(_ name: String, payload: Data = Data("{}".utf8)) {
        bus.publish(self) { .emitted(name: name, payload: payload) }
    }

    /// Emits an event whose payload is `value` encoded as JSON.
    /// - Throws: ``CommandBusError`` with code `encodingFailed` if `value` does not encode.
    public func emit(_ name: String, _ value: some Encodable) throws(CommandBusError) {
        guard bus.events.hasSubscribers else { return }
        let data: Data
        do { data = try JSONWire.encode(value) } catch {
            throw .encodingFailed(envelope.commandName, cause: error)
        }
        emit(name, payload: data)
    }

    /// Reports how far the handler has got: `done` of `total` units. From then on this is the
    /// command's progress; until then, the bus reports how many of its subcommands have finished.
    public func progress(done: Int, total: Int) {
        guard total > 0 else { return }
        let done = min(max(done, 0), total)
        execution.withLock { $0.reportsProgress = true }
        bus.publish(self) { .progress(completed: done, total: total) }
    }

    /// Writes a log line about this command to the bus's observers.
    public func log(_ level: LogLevel, _ message: String) {
        bus.publish(self, isLog: true) { .log(level: level, message: message) }
    }

    /// Sends a subcommand and waits for its result.
    ///
    /// The child carries this command's id as its parent and shares its correlation id.
    /// Cancelling this command cancels the child.
    /// - Throws: ``CommandBusError`` if the child fails, is cancelled, or times out.
    public func send<C: Command>(_ child: C, metadata: [String: String] = [:], timeout: Duration? = nil) async throws(CommandBusError) -> C.Result {
        let childContext = try bus.dispatch(.typed(child), name: C.name, parent: self, metadata: metadata, timeout: timeout)
        return try await childContext.result().value(as: C.Result.self, commandName: C.name)
    }

    /// Sends a subcommand by name with a JSON payload and waits for its JSON result.
    public func send(name: String, payload: Data, metadata: [String: String] = [:], timeout: Duration? = nil) async throws(CommandBusError) -> Data {
        let childContext = try bus.dispatch(.json(payload), name: name, parent: self, metadata: metadata, timeout: timeout)
        return try await childContext.result().jsonData(commandName: name)
    }

    /// Sends a subcommand without waiting for it; this command finishes only when the child has.
    ///
    /// A posted child that fails, and whose result nobody awaited, fails this command with `childFailed`.
    public func post<C: Command>(_ child: C, metadata: [String: String] = [:], timeout: Duration? = nil) -> CommandTicket<C.Result> {
        CommandTicket(bus.post(.typed(child), name: C.name, parent: self, metadata: metadata, timeout: timeout))
    }
}
