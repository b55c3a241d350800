import Synchronization

extension CommandContext {
    typealias Outcome = CommandExecution.Outcome

    /// Stores the task running the command, cancelling it at once if cancellation came first.
    func attach(task: Task<Outcome, Never>) {
        let cancelNow = execution.withLock { execution -> Bool in
            if !execution.lifecycle.state.isTerminal { execution.task = task }
            return execution.cancelRequested
        }
        if cancelNow { task.cancel() }
    }

    /// Stores the runner the command is about to run on, cancelling it at once if cancellation came first.
    func attach(runner: PostRunner) {
        let cancelNow = execution.withLock { execution -> Bool in
            if !execution.lifecycle.state.isTerminal { execution.runner = runner }
            return execution.cancelRequested
        }
        if cancelNow { runner.cancel(ifRunning: self) }
    }

    /// Starts the deadline: when it passes first, the command ends `timedOut` and its task is cancelled.
    func startWatchdog(_ timeout: Duration) {
        let watchdog = Task { [weak self] in
            do { try await Task.sleep(for: timeout) } catch { return }
            self?.finish(.failure(.timedOut(self?.envelope.commandName ?? "?", after: timeout)), as: .timedOut)
        }
        let finished = execution.withLock { execution -> Bool in
            if execution.lifecycle.state.isTerminal { return true }
            execution.watchdog = watchdog
            return false
        }
        if finished { watchdog.cancel() }
    }

    /// Moves from pending to running; `false` if the command already ended (cancelled or timed out).
    /// - Parameter countingAttempt: Also count the first handler call (when no middleware will count it).
    func markRunning(countingAttempt: Bool) -> Bool {
        let moved = execution.withLock { execution -> Bool in
            guard !execution.cancelRequested, (try? execution.lifecycle.transition(to: .running)) != nil else { return false }
            if countingAttempt { execution.attempts += 1 }
            return true
        }
        if moved { bus.publish(self) { .stateChanged(from: .pending, to: .running) } }
        return moved
    }

    /// Counts one call of the handler (retries make more).
    func recordAttempt() {
        execution.withLock { $0.attempts += 1 }
    }

    /// How many times the handler has been called for this command so far.
    public var attempts: Int { execution.withLock { $0.attempts } }

    /// Ends the command with `outcome` in `state`, unless it has already ended.
    /// - Parameter recorded: The journal already has this ending; otherwise it is queued there.
    /// - Returns: The command's final outcome: this one, or the one that ended it first.
    @discardableResult
    func finish(_ outcome: Outcome, as state: CommandState, recorded: Bool = false) -> Outcome {
        struct Ended {
            let previous: CommandState
            let waiters: [UnsafeContinuation<Outcome, Never>]
            let callbacks: [@Sendable (Outcome) -> Void]
            let writeAhead: WriteAhead
            let watchdog: Task<Void, Never>?
            let task: Task<Outcome, Never>?
            let runner: PostRunner?
            let children: [CommandContext]
        }
        var earlier: Outcome?
        let ended = execution.withLock { execution -> Ended? in
            guard let previous = try? execution.lifecycle.transition(to: state) else {
                earlier = execution.outcome
                return nil
            }
            execution.outcome = outcome
            execution.settled = parent == nil
            // Drop the task and watchdog: a finished task still holds its first allocation slab.
            defer {
                execution.waiters = []; execution.callbacks = []
                if case .awaited = execution.writeAhead { execution.writeAhead = .notWritten }
                execution.task = nil; execution.runner = nil; execution.watchdog = nil
            }
            let abandoned = state == .cancelled || state == .timedOut
            if abandoned { execution.cancelRequested = true }
            return Ended(
                previous: previous, waiters: execution.waiters, callbacks: execution.callbacks,
                writeAhead: execution.writeAhead, watchdog: execution.watchdog,
                task: abandoned ? execution.task : nil, runner: abandoned ? execution.runner : nil,
                children: abandoned ? execution.children : []
            )
        }
        guard let ended else { return earlier ?? outcome }
        // Drop the children: each holds this context as its parent, so a parent that kept them kept
        // itself, its children and their payloads and results for good (a host running trees of
        // subcommands grew by 4 KB a tree, without end). Asked of the count after the end, in a lock
        // of its own: in the lock above it cost every command 100 instructions. A child added before
        // the end was counted before it was added (``addChild(_:)``); one after it is not kept.
        if childCount.load(ordering: .sequentiallyConsistent) > 0 { execution.withLock { $0.children = [] } }
        ended.watchdog?.cancel()
        ended.task?.cancel()
        ended.runner?.cancel(ifRunning: self)
        for child in ended.children { child.cancel() }
        if !recorded, let journal {
            let update = journalUpdate(outcome, state: state)
            Task { try? await journal.update(update, waitUntilDurable: false) }
        }
        // Observers hear of the end before anyone waiting for the result wakes up.
        bus.publish(self) { .stateChanged(from: ended.previous, to: state) }
        bus.commandDidFinish(self, outcome: outcome, state: state)
        // So does the parent's progress: counted after the waiters woke, the parent (woken by its
        // last child's result) could end, and say so, before that child's "3 of 3" (a CI run).
        // Until it is counted, the outcome is not taken (``CommandExecution/settled``), and those
        // who came for it meanwhile are woken below.
        var late: (waiters: [UnsafeContinuation<Outcome, Never>], callbacks: [@Sendable (Outcome) -> Void]) = ([], [])
        if let parent {
            parent.childDidFinish()
            late = execution.withLock { execution in
                execution.settled = true
                defer { execution.waiters = []; execution.callbacks = [] }
                return (execution.waiters, execution.callbacks)
            }
        }
        // Ended before its write-ahead was written (the journal refused it, it was cancelled first,
        // or no handler would take it).
        if case .awaited(let callbacks) = ended.writeAhead {
            for callback in callbacks { callback(outcome.map { _ in () }) }
        }
        for waiter in ended.waiters + late.waiters { waiter.resume(returning: outcome) }
        for callback in ended.callbacks + late.callbacks { callback(outcome) }
        return outcome
    }

    /// Cancels the command: its task sees task cancellation, and so do its children.
    func cancel() {
        let (task, runner, wasPending, children) = execution.withLock { execution in
            execution.cancelRequested = true
            return (execution.task, execution.runner, execution.lifecycle.state == .pending, execution.children)
        }
        task?.cancel()
        runner?.cancel(ifRunning: self)
        for child in children { child.cancel() }
        // A command still waiting for a slot ends now; a running one ends when its handler returns.
        if wasPending { finish(.failure(.cancelled(envelope.commandName)), as: .cancelled) }
    }

    /// Calls `body` once the journal has the command's write-ahead (``CommandTicket/whenWrittenAhead(_:)``).
    func whenWrittenAhead(_ body: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        // A command refused before it was routed (no handler, a payload that does not decode) is
        // not journaled but still fails: its caller hears the refusal, once it has been recorded.
        guard journal != nil || assignment == nil else { return body(.success(())) }
        let now = execution.withLock { execution -> Result<Void, CommandBusError>? in
            if case .written = execution.writeAhead { return .success(()) }
            if let outcome = execution.outcome { return outcome.map { _ in () } }
            execution.writeAhead.add(body)
            return nil
        }
        if let now { body(now) }
    }

    /// The journal has the command's write-ahead: tells whoever waits to hear so.
    func markWrittenAhead() {
        let before = execution.withLock { execution in
            defer { execution.writeAhead = .written }
            return execution.writeAhead
        }
        if case .awaited(let callbacks) = before {
            for callback in callbacks { callback(.success(())) }
        }
    }

    /// Calls `body` with the outcome when the command ends (at once if it has), on the thread
    /// that ends it, with no task waiting; the outcome counts as seen.
    func whenFinished(_ body: @escaping @Sendable (Outcome) -> Void) {
        let done = execution.withLock { execution -> Outcome? in
            execution.observed = true
            if execution.settled, let outcome = execution.outcome { return outcome }
            execution.callbacks.append(body)
            return nil
        }
        if let done { body(done) }
    }

    /// Waits for the outcome; `markingObserved` records that someone saw it (so a failure is not unnoticed).
    nonisolated(nonsending) func outcome(markingObserved: Bool = true) async -> Outcome {
        if let done = execution.withLock({ execution -> Outcome? in
            if markingObserved { execution.observed = true }
            return execution.settled ? execution.outcome : nil
        }) { return done }
        return await withUnsafeContinuation { continuation in
            let done = execution.withLock { execution -> Outcome? in
                if execution.settled, let outcome = execution.outcome { return outcome }
                execution.waiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// Waits for the result; if the waiting task is cancelled, the command is cancelled too.
    ///
    /// With no deadline, it awaits the command's task directly, which is the runtime's cheapest wait.
    /// With one, it waits for the outcome, so that a handler ignoring cancellation cannot hold it past the deadline.
    func result(task: Task<Outcome, Never>?) async throws(CommandBusError) -> CommandOutput {
        let finished: Outcome = await withTaskCancellationHandler {
            if let task, timeout == nil {
                // Only a parent's bookkeeping reads `observed`; a root command skips the lock.
                if parent != nil { execution.withLock { $0.observed = true } }
                return await task.value
            }
            return await self.outcome()
        } onCancel: {
            self.cancel()
        }
        return try finished.get()
    }

    /// Notes a subcommand sent, which this command's end waits for (or cancels). One sent after
    /// the end (from a task the handler left behind) is not kept: nothing would drop it again.
    func addChild(_ child: CommandContext) {
        childCount.add(1, ordering: .sequentiallyConsistent)
        let cancelled = execution.withLock { execution -> Bool in
            guard !execution.lifecycle.state.isTerminal else { return execution.cancelRequested }
            execution.children.append(child)
            return execution.cancelRequested
        }
        if cancelled { child.cancel() }
    }

    /// Counts a finished child and reports the progress. The event is published under the lock
    /// that counts, so two children finishing at once report 1 then 2, never 2 then 1: published
    /// after the lock, a late "1" once came after the parent's end (a CI run under heavy load).
    /// A parent that has ended (cancelled, timed out or failed before its children) reports no
    /// more; until it ends, it holds every child it sent, so their count is the total.
    private func childDidFinish() {
        execution.withLock { execution in
            execution.childrenFinished += 1
            guard !execution.reportsProgress, !execution.lifecycle.state.isTerminal else { return }
            let (finished, total) = (execution.childrenFinished, execution.children.count)
            bus.publish(self) { .progress(completed: finished, total: total) }
        }
    }

    /// Waits until every child has finished; a failed child whose result nobody awaited fails the parent.
    ///
    /// Cancelling the waiting task cancels the command and so its children: a `send` runs in its
    /// caller's task with no cancellation handler of its own, and this is where its children hear of it.
    nonisolated(nonsending) func awaitChildren() async throws(CommandBusError) {
        guard childCount.load(ordering: .acquiring) > 0 else { return }
        let failure: CommandBusError? = await withTaskCancellationHandler {
            do throws(CommandBusError) { try await awaitEachChild() } catch { return error }
            return nil
        } onCancel: {
            self.cancel()
        }
        if let failure { throw failure }
    }

    private nonisolated(nonsending) func awaitEachChild() async throws(CommandBusError) {
        var index = 0
        while let child = execution.withLock({ index < $0.children.count ? $0.children[index] : nil }) {
            index += 1
            let outcome = await child.outcome(markingObserved: false)
            if case .failure(let error) = outcome, !child.execution.withLock({ $0.observed }) {
                throw CommandBusError(
                    code: .childFailed,
                    message: "subcommand '\(child.envelope.commandName)' (\(child.envelope.id)) of '\(envelope.commandName)' failed: \(error.message)",
                    cause: error
                )
            }
        }
    }
}
