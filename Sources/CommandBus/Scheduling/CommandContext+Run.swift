#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The handler chosen for a command, with the payload in the form that handler takes.
struct HandlerAssignment: Sendable {
    let entry: RouteEntry
    let prepared: CommandPayload
}

extension CommandContext {
    /// The body of a command's task (or of a `send` on the caller's task): write it ahead to the
    /// journal, wait for slots, run the handler through the middleware, wait for children, record
    /// how it ended. `@concurrent`: it runs on the global executor whoever calls it, so a handler
    /// never runs on the caller's actor.
    @concurrent func run() async -> Outcome {
        guard let assignment else { return await outcome(markingObserved: false) }
        let name = envelope.commandName
        if let journal, !isWrittenAheadOnPost {
            let pool = runnerPool
            pool?.runnerWaitsForJournal(true)
            do {
                try await journal.accept(envelope, payload: try assignment.prepared.jsonData(commandName: name))
                pool?.runnerWaitsForJournal(false)
                markWrittenAhead()
            } catch {
                pool?.runnerWaitsForJournal(false)
                return finish(.failure(error), as: .failed, recorded: true)
            }
        }
        let entry = assignment.entry
        let busSlot = parent == nil ? bus.busLimiter : nil
        var held: [ConcurrencyLimiter] = []
        defer { for limiter in held { limiter.release() } }
        do {
            if let busSlot {
                try await busSlot.acquire()
                held.append(busSlot)
            }
            if let handlerSlot = entry.limiter {
                try await handlerSlot.acquire()
                held.append(handlerSlot)
            }
            try Task.checkCancellation()
            let middleware = bus.configuration.middleware
            guard markRunning(countingAttempt: middleware.isEmpty) else {
                let ended = await outcome(markingObserved: false)
                return await conclude(ended, as: state, releasing: &held)
            }
            if let journal {
                try? await journal.update(JournalUpdate(id: envelope.id, state: .running, attempts: attempts), waitUntilDurable: false)
            }
            let output = if middleware.isEmpty {
                try await handleInChain(assignment)
            } else {
                try await MiddlewarePipeline(middleware: middleware, assignment: assignment).run(self)
            }
            // The common case, no children and no journal, makes no further async call.
            if childCount.load(ordering: .acquiring) > 0 { try await awaitChildren() }
            guard isJournaled else { return finish(.success(output), as: .succeeded) }
            return await conclude(.success(output), as: .succeeded, releasing: &held)
        } catch {
            // `Task.isCancelled`: a `send` runs in its caller's task, whose cancellation is the command's.
            if isCancelRequested || Self.isCancellation(error) || Task.isCancelled {
                return await conclude(.failure(.cancelled(name)), as: .cancelled, releasing: &held)
            } else if let busError = error as? CommandBusError {
                return await conclude(.failure(busError), as: .failed, releasing: &held)
            } else {
                return await conclude(.failure(.handlerFailed(name, cause: error)), as: .failed, releasing: &held)
            }
        }
    }

    /// Writes a posted command ahead to the journal, which queues the write with its others, and
    /// queues the command on `runners` once that is durable; ends it `failed` if the journal could
    /// not take it. The runner that takes it then runs it without a journal wait of its own.
    func writeAhead(thenQueueOn runners: PostRunners) {
        guard let journal, let assignment else { return runners.submit(self) }
        let payload: Data
        do {
            payload = try assignment.prepared.jsonData(commandName: envelope.commandName)
        } catch {
            finish(.failure(error), as: .failed, recorded: true)
            return
        }
        journal.accept(envelope, payload: payload) { [self] written in
            switch written {
            case .success:
                markWrittenAhead()
                runners.submit(self)
            case .failure(let error): finish(.failure(error), as: .failed, recorded: true)
            }
        }
    }

    /// Whether `error` is a `CancellationError`. Out of line: asking in `run()` kept room for one
    /// in its frame, a type whose size is known only at run time, which cost every command an
    /// allocation in its task before it started (`send` 6,593 -> 6,454 instructions).
    @inline(never)
    static func isCancellation(_ error: any Error) -> Bool {
        error is CancellationError
    }

    /// Runs the assigned handler; if it declines (``HandlerDeclined``), the next one in the chain
    /// that would take the command runs instead, holding a slot of its own handler's limit.
    @inline(__always)
    nonisolated(nonsending) func handleInChain(_ assignment: HandlerAssignment) async throws -> CommandOutput {
        do {
            return try await assignment.entry.box.handle(assignment.prepared, context: self)
        } catch is HandlerDeclined {
            return try await handleAfterDeclining(assignment)
        }
    }

    /// The rest of the chain, once the assigned handler declined.
    private nonisolated(nonsending) func handleAfterDeclining(_ assignment: HandlerAssignment) async throws -> CommandOutput {
        var declined = assignment.entry
        while true {
            let (entry, prepared) = try bus.route(assignment.prepared, name: envelope.commandName, after: declined)
            if let limiter = entry.limiter { try await limiter.acquire() }
            defer { entry.limiter?.release() }
            do {
                return try await entry.box.handle(prepared, context: self)
            } catch is HandlerDeclined {
                declined = entry
            }
        }
    }

    /// Records how the command ended, durably, then ends it. If it already ended another way
    /// (a deadline, a cancellation), that way is recorded: the journal keeps the first ending.
    ///
    /// A command on a post runner hands its ending to the journal and returns at once: the
    /// journal ends the command (its waiters, observers and events hear of it) and releases its
    /// concurrency slots (`held`, emptied here) once the ending is durable, and the runner takes
    /// its next command meanwhile. Waiting cost each posted command a suspension and a resumption
    /// through the global executor, and kept its runner idle for a commit. A `send` on its
    /// caller's task waits, since its caller awaits the outcome `run()` returns.
    private nonisolated(nonsending) func conclude(
        _ outcome: Outcome, as state: CommandState, releasing held: inout [ConcurrencyLimiter]
    ) async -> Outcome {
        guard let journal else { return finish(outcome, as: state) }
        let earlier = execution.withLock { $0.lifecycle.state.isTerminal ? ($0.outcome, $0.lifecycle.state) : nil }
        let (recordedOutcome, recordedState) = earlier.flatMap { ended in ended.0.map { ($0, ended.1) } } ?? (outcome, state)
        let update = journalUpdate(recordedOutcome, state: recordedState)
        guard runnerPool != nil else {
            // A journal that cannot record the ending leaves the command running there; recovery runs it again.
            try? await journal.update(update, waitUntilDurable: true)
            return finish(outcome, as: state, recorded: true)
        }
        let slots = held
        held = []
        journal.update(update) { [self] _ in
            _ = finish(outcome, as: state, recorded: true)
            for limiter in slots { limiter.release() }
        }
        return outcome
    }

    /// The post runners' pool, if a runner is running this command: it counts the runners that
    /// wait for the journal (``PostRunners/journalBoundRunners``).
    private var runnerPool: PostRunners? {
        execution.withLock { $0.runner } != nil ? bus.postRunners : nil
    }

    /// The journal's view of an ending.
    func journalUpdate(_ outcome: Outcome, state: CommandState) -> JournalUpdate {
        switch outcome {
        case .success(let output):
            let result = try? output.jsonData(commandName: envelope.commandName)
            return JournalUpdate(id: envelope.id, state: state, attempts: attempts, result: result)
        case .failure(let error):
            return JournalUpdate(id: envelope.id, state: state, attempts: attempts, error: error)
        }
    }
}
