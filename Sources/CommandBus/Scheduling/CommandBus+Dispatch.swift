#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension CommandBus {
    /// Picks the handler for a command: the first, in priority order, whose `canHandle` says yes.
    /// - Parameter declined: The handler that declined it in `handle` (``HandlerDeclined``): only
    ///   the handlers after it in the chain are asked, or the whole chain as it stands now if it
    ///   was taken off the bus meanwhile (a plugin replaced while the command was on its way to it).
    /// - Throws: `noHandler` when none will; `decodingFailed` when the payload does not fit the chosen handler.
    func route(
        _ payload: CommandPayload, name: String, useFallback: Bool = true, after declined: RouteEntry? = nil
    ) throws(CommandBusError) -> (RouteEntry, CommandPayload) {
        try checkSize(of: payload, name: name)
        let entries = routes.withLock { $0.handlers(for: name) }
        let fallback = useFallback ? fallbackEntry : nil
        var start = entries.startIndex
        if let declined {
            if declined.registrationID == fallback?.registrationID { throw .noHandler(name, registered: entries.count) }
            start = entries.firstIndex { $0.registrationID == declined.registrationID }.map { $0 + 1 } ?? entries.startIndex
        }
        for entry in entries[start...] {
            let prepared = try entry.box.prepare(payload, commandName: name)
            if try entry.box.canHandle(prepared, commandName: name) {
                return (entry, prepared)
            }
        }
        if let fallback {
            let prepared = try fallback.box.prepare(payload, commandName: name)
            if try fallback.box.canHandle(prepared, commandName: name) { return (fallback, prepared) }
        }
        throw .noHandler(name, registered: entries.count)
    }

    /// Refuses a JSON payload over the configured limit.
    func checkSize(of payload: CommandPayload, name: String) throws(CommandBusError) {
        if let limit = configuration.maxPayloadBytes, case .json(let data) = payload, data.count > limit {
            throw CommandBusError(
                code: .payloadTooLarge, message: "payload for '\(name)' is \(data.count) bytes, more than the \(limit)-byte limit"
            )
        }
    }

    /// Routes and starts a command; routing errors are thrown to the sender.
    /// - Parameters:
    ///   - envelope: The envelope to run it under (a recovery, a replay); a new one by default.
    ///   - journaled: Whether it may be written to the journal (replays are not).
    func dispatch(
        _ payload: CommandPayload, name: String, parent: CommandContext?,
        metadata: [String: String], timeout: Duration?, envelope: CommandEnvelope? = nil, journaled: Bool = true
    ) throws(CommandBusError) -> StartedCommand {
        start(try routedContext(
            payload, name: name, parent: parent, metadata: metadata, timeout: timeout, envelope: envelope, journaled: journaled
        ))
    }

    /// Starts a routed command in a task of its own, watched by its deadline if it has one.
    func start(_ context: CommandContext) -> StartedCommand {
        let task = Task { await context.run() }
        context.attach(task: task)
        if let deadline = context.timeout { context.startWatchdog(deadline) }
        return StartedCommand(context: context, task: task)
    }

    /// Routes a root command and runs it on the caller's task when nothing forces a hop: no task
    /// is started and no thread is woken, which is most of the cost of a quick `send`.
    ///
    /// The guarantees are those of a command in a task of its own: the journal's write-ahead,
    /// concurrency limits, middleware, lifecycle events and observers are the same code
    /// (``CommandContext/run()``); cancelling the caller cancels the command (the handler sees
    /// its task cancelled, and its children are cancelled with it); and the handler
    /// runs on the global executor, never on the caller's actor, since `run()` is `@concurrent`.
    /// A deadline forces the hop: a handler that ignores cancellation must not hold the caller
    /// past it, so a command with a timeout runs in a task of its own, as a posted one does.
    @usableFromInline @inline(__always)
    nonisolated(nonsending) func sendOnCallersTask(
        _ payload: CommandPayload, name: String, metadata: [String: String], timeout: Duration?
    ) async throws(CommandBusError) -> CommandOutput {
        let context = try routedContext(payload, name: name, parent: nil, metadata: metadata, timeout: timeout, envelope: nil, journaled: true)
        guard context.timeout != nil else {
            // No cancellation handler is needed: the handler runs in the caller's task, so it sees
            // the caller's cancellation itself, and `run()` ends such a command `cancelled`.
            // Subcommands, which run in tasks of their own, are cancelled when it ends, or by
            // `awaitChildren()` if the handler returns while they run.
            return try await context.run().get()
        }
        return try await runInTaskOfItsOwn(context)
    }

    /// Runs a command with a deadline in a task of its own, watched, and waits for its result.
    ///
    /// A function of its own so that the quick path's frame does not hold what starting a task
    /// needs (its optional priority is of a size known only at run time, which cost every `send`
    /// an allocation in its task).
    @inline(never)
    nonisolated(nonsending) func runInTaskOfItsOwn(_ context: CommandContext) async throws(CommandBusError) -> CommandOutput {
        try await start(context).result()
    }

    /// Refuses a command more than ``CommandBusConfiguration/maxSubcommandDepth`` levels below its
    /// root: a subcommand of `parent` (one below it), or a command whose given envelope says how
    /// deep it is (one another host's handler sent, claimed from the shared bus).
    private func checkDepth(below parent: CommandContext?, envelope: CommandEnvelope?, name: String) throws(CommandBusError) {
        let limit = configuration.maxSubcommandDepth
        let depth = parent.map { $0.envelope.depth + 1 } ?? envelope?.depth ?? 0
        guard depth > limit else { return }
        // Only past the limit (the first command refused is exactly one past it): name its root,
        // or, where the tree came from another host, the tree's correlation id.
        var top = parent
        while let up = top?.parent { top = up }
        let root = if let top, top.envelope.depth == 0 {
            "its root command '\(top.envelope.commandName)' (\(top.envelope.id))"
        } else {
            "its root (correlation id \(parent?.envelope.correlationID ?? envelope?.correlationID ?? UUID())), which another host ran"
        }
        let what = parent.map { "subcommand '\(name)' of '\($0.envelope.commandName)'" } ?? "command '\(name)'"
        throw CommandBusError(
            code: .tooDeep,
            message: "\(what) would be \(depth) levels below \(root), past the limit of \(limit): a command that sends itself, "
                + "or its ancestors, without end? (CommandBusConfiguration.maxSubcommandDepth)"
        )
    }

    /// Routes a command and makes its context, without starting it.
    /// - Parameter writtenAheadOnPost: The command, if journaled, is written ahead before it is queued (see ``CommandContext/isWrittenAheadOnPost``).
    func routedContext(
        _ payload: CommandPayload, name: String, parent: CommandContext?,
        metadata: [String: String], timeout: Duration?, envelope: CommandEnvelope?, journaled: Bool, writtenAheadOnPost: Bool = false
    ) throws(CommandBusError) -> CommandContext {
        if parent != nil || envelope?.depth ?? 0 > 0 { try checkDepth(below: parent, envelope: envelope, name: name) }
        let (entry, prepared) = try route(payload, name: name)
        return makeContext(
            name: name, parent: parent, metadata: metadata, timeout: timeout ?? configuration.defaultTimeout, envelope: envelope,
            assignment: HandlerAssignment(entry: entry, prepared: prepared),
            journaled: journaled && hasJournal && entry.box.isJournaled, writtenAheadOnPost: writtenAheadOnPost
        )
    }

    /// Routes and starts a command; routing errors end up in the returned context's outcome.
    /// - Parameter executor: A task executor the caller wants a root command to run on (the
    ///   server's request loop): it gets a task of its own there, as a subcommand gets one on the
    ///   global executor, instead of waiting for a runner. The guarantees are those of any task.
    func post(
        _ payload: CommandPayload, name: String, parent: CommandContext?,
        metadata: [String: String], timeout: Duration?, envelope: CommandEnvelope? = nil, preferring executor: (any TaskExecutor)? = nil
    ) -> CommandContext {
        do {
            guard parent == nil else {
                return try dispatch(payload, name: name, parent: parent, metadata: metadata, timeout: timeout, envelope: envelope).context
            }
            // A root command waits its turn on a runner rather than starting a task of its own;
            // with a journal that queues write-aheads, it is queued once its write-ahead is durable.
            let writeAheadNow = executor == nil && journalQueuesWriteAheads
            let context = try routedContext(
                payload, name: name, parent: nil, metadata: metadata, timeout: timeout, envelope: envelope, journaled: true,
                writtenAheadOnPost: writeAheadNow
            )
            if let deadline = context.timeout { context.startWatchdog(deadline) }
            if let executor {
                let task = Task(executorPreference: executor) { await context.run() }
                context.attach(task: task)
                return context
            }
            if context.isWrittenAheadOnPost {
                context.writeAhead(thenQueueOn: postRunners)
            } else {
                postRunners.submit(context)
            }
            return context
        } catch {
            let context = makeContext(
                name: name, parent: parent, metadata: metadata, timeout: nil, envelope: envelope, assignment: nil, journaled: false
            )
            guard let journal = configuration.journal, case .json(let bytes) = payload else {
                context.finish(.failure(error), as: .failed)
                return context
            }
            // A command refused before it ran is still a dead letter: journaled as failed, with its
            // reason, before its sender hears of it (an oversized payload is not kept).
            let kept = error.code == .payloadTooLarge ? Data() : bytes
            let envelope = context.envelope
            Task {
                try? await journal.accept(envelope, payload: kept)
                try? await journal.update(JournalUpdate(id: envelope.id, state: .failed, attempts: 0, error: error), waitUntilDurable: true)
                context.finish(.failure(error), as: .failed)
            }
            return context
        }
    }

    private func makeContext(
        name: String, parent: CommandContext?, metadata: [String: String], timeout: Duration?,
        envelope preset: CommandEnvelope?, assignment: consuming HandlerAssignment?, journaled: Bool, writtenAheadOnPost: Bool = false
    ) -> CommandContext {
        let envelope = preset ?? CommandEnvelope(commandName: name, parent: parent?.envelope, metadata: metadata)
        let observed = observerCount.load(ordering: .acquiring) > 0
        let context = CommandContext(
            envelope: envelope, bus: self, parent: parent, timeout: timeout, assignment: assignment, journaled: journaled,
            writtenAheadOnPost: writtenAheadOnPost, timesAcceptance: observed
        )
        parent?.addChild(context)
        if observed {
            for observer in observers.withLock({ $0 }) { observer.commandAccepted(envelope) }
        }
        publish(context) { .accepted }
        return context
    }

    func commandDidFinish(_ context: CommandContext, outcome: CommandExecution.Outcome, state: CommandState) {
        guard observerCount.load(ordering: .acquiring) > 0 else { return }
        let current = observers.withLock { $0 }
        let error: CommandBusError? = if case .failure(let error) = outcome { error } else { nil }
        let duration = context.acceptedAt.map { .now - $0 } ?? .zero
        for observer in current { observer.commandFinished(context.envelope, state: state, error: error, after: duration) }
    }
}

/// A command that has been routed and started, with the task that runs it.
struct StartedCommand: Sendable {
    let context: CommandContext
    let task: Task<CommandContext.Outcome, Never>

    func result() async throws(CommandBusError) -> CommandOutput {
        try await context.result(task: task)
    }
}

extension CommandContext {
    /// Whether someone asked for this command to stop.
    var isCancelRequested: Bool { execution.withLock { $0.cancelRequested } }
}
