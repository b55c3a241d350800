import CommandBus
import CommandBusHost
import CommandBusSupport
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The third `BusClient`: the bus is shared, in PostgreSQL, and `cmdbus serve --bus` hosts on
/// any machine run its commands. Needs no plugins here; prints and exits as a local run does.
package final class PostgresBusClient: BusClient {
    let connections: PGConnectionPool
    private let waiter: ResultWaiter
    /// The URL without its password.
    package let redactedURL: String
    /// The URL, for a session of its own (``loadPluginAgain(_:)`` listens for the hosts' answers).
    let url: String

    /// Connects to the bus at `url` and makes sure its schema is there and not newer than this binary.
    ///
    /// While the server is away (``PGError/isServerAway``: a restart, a database started after
    /// the client), it tries again for up to 10 s (nothing is accepted yet, so a caller can try
    /// again, and a mistyped address costs no more); anything else fails at once.
    /// - Parameter waiting: Told once, with the reason, if it has to wait.
    package init(url: String, waiting: ((String) -> Void)? = nil) throws(HostFailure) {
        redactedURL = PGURL.redacted(url)
        self.url = url
        connections = PGConnectionPool(url: url)
        try Self.retrying(on: connections, for: .seconds(10), when: \.isServerAway, waiting: waiting) { connection throws(PGError) in
            try BusSchema.migrate(connection)
        }
        // Its thread listens from now on: only once the bus is there.
        waiter = ResultWaiter(url: url)
    }

    /// A bus error as the host's failure: a schema from a newer binary, a refused login, a database it may not write.
    package static func failure(_ error: PGError) -> HostFailure {
        switch error.code {
        case .connectionFailed, .connectionLost: HostFailure(.serverUnreachable, error.message)
        case .permissionDenied: HostFailure(.journalFailed, "\(error.message) (the bus needs a role that may create and write schema cmdbus)")
        default: HostFailure(.journalFailed, error.message)
        }
    }

    /// Submits, retrying for up to 30 s while the server is unreachable (a restart): the same id
    /// inserts once however often it is sent.
    private func submit(_ submission: BusSubmission) throws(HostFailure) -> UUID {
        try retrying { connection throws(PGError) in try submission.submit(on: connection).id }
    }

    /// Runs `body` on a pooled connection, again for up to 30 s while the server is unreachable.
    private func retrying<T>(_ body: (PGConnection) throws(PGError) -> T) throws(HostFailure) -> T {
        try Self.retrying(on: connections, body)
    }

    /// Runs `body` on a connection of `connections`, again for up to `window` while `retryable`
    /// says waiting may help (by default, while the server is unreachable).
    /// - Parameter waiting: Told once, with the reason, before the first wait.
    private static func retrying<T>(
        on connections: PGConnectionPool, for window: Duration = .seconds(30), when retryable: (PGError) -> Bool = \.isConnectionProblem,
        waiting: ((String) -> Void)? = nil, _ body: (PGConnection) throws(PGError) -> T
    ) throws(HostFailure) -> T {
        let deadline = ContinuousClock.now + window
        var delay: Duration = .milliseconds(50)
        var told = false
        while true {
            do {
                return try connections.with(body)
            } catch {
                guard retryable(error), ContinuousClock.now + delay < deadline else { throw Self.failure(error) }
                if !told, let waiting {
                    waiting("\(error.message); trying again for up to \(window.spoken)")
                    told = true
                }
                WakeSignal().wait(upTo: delay)
                delay = min(delay * 2, .seconds(1))
            }
        }
    }

    /// The request as a submission, refused (before it can fail a batch's statement) if
    /// PostgreSQL could not keep it as it is (``BusSubmission/unstorableReason``).
    private static func submission(_ request: CommandRequest) throws(HostFailure) -> BusSubmission {
        var submission = BusSubmission(name: request.name, payload: request.payload, metadata: request.metadata)
        if let reason = submission.unstorableReason { throw HostFailure(.decodingFailed, reason, command: request.name) }
        submission.timeout = request.timeout
        submission.delay = request.delay ?? .zero
        submission.priority = request.priority
        if let maxAttempts = request.maxAttempts { submission.maxAttempts = maxAttempts }
        return submission
    }

    package func send(_ request: CommandRequest, onEvent: (@Sendable ([String: JSONValue]) -> Void)?) async throws(HostFailure) -> Data {
        let submission = try Self.submission(request)
        let row = try await run(submission, onEvent: onEvent)
        do {
            return try row.outcome()
        } catch {
            throw HostFailure.bus(error, command: request.name)
        }
    }

    /// Runs one command and returns its id with its result (an undo links the two).
    package func sendReturningID(_ request: CommandRequest) async throws(HostFailure) -> (id: UUID, result: Data) {
        let row = try await run(try Self.submission(request), onEvent: nil)
        do {
            return (row.id, try row.outcome())
        } catch {
            throw HostFailure.bus(error, command: request.name)
        }
    }

    /// Submits and waits for the final row; cancelling the waiting task cancels the command on the bus.
    private func run(_ submission: BusSubmission, onEvent: (@Sendable ([String: JSONValue]) -> Void)?) async throws(HostFailure) -> BusCommandRow {
        let failure = Mutex<HostFailure?>(nil)
        let row = await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<BusCommandRow?, Never>) in
                waiter.watch(submission.id, correlation: submission.correlationID, onEvent: onEvent) { row in continuation.resume(returning: row) }
                do throws(HostFailure) {
                    let id = try submit(submission)
                    if id != submission.id {
                        // A key seen before: follow the first command instead.
                        waiter.forget(submission.id)
                        waiter.watch(id, correlation: id, onEvent: onEvent) { row in continuation.resume(returning: row) }
                    }
                } catch {
                    waiter.forget(submission.id)
                    failure.withLock { $0 = error }
                    continuation.resume(returning: nil)
                }
            }
        } onCancel: {
            _ = try? connections.with { connection throws(PGError) in try connection.execute(BusSQL.cancel, [.uuidArray([submission.id])]) }
        }
        if let row { return row }
        throw failure.withLock { $0 } ?? HostFailure(.serverUnreachable, "the bus at \(redactedURL) did not take '\(submission.name)'")
    }

    package func post(_ request: CommandRequest) async throws(HostFailure) -> UUID {
        var submission = try Self.submission(request)
        submission.failIfUnhandled = false
        return try submit(submission)
    }

    /// The most commands one statement posts.
    static let postBatchLimit = 1_000

    /// Posts what the input has ready together, in one statement of up to ``postBatchLimit``
    /// commands (one commit, where a statement per command made one each), on up to
    /// `concurrency` tasks at once through the pool; a line that comes alone is posted alone, at
    /// once. Stops at the first failure, which is the bus's (unreachable, refusing writes), not a command's.
    package func postAll(
        concurrency: Int, next: @escaping () -> CommandRequest?, isNextReady: @escaping () -> Bool,
        onOutcome: @escaping (CommandOutcome) -> Void
    ) async throws(HostFailure) {
        let failure: HostFailure? = await withTaskGroup(of: Result<[CommandOutcome], HostFailure>.self) { group in
            var inFlight = 0
            var failure: HostFailure?
            func take(_ result: Result<[CommandOutcome], HostFailure>) {
                switch result {
                case .success(let outcomes): outcomes.forEach(onOutcome)
                case .failure(let error): failure = failure ?? error
                }
            }
            while failure == nil, let first = next() {
                var batch = [first]
                var bytes = first.payload.count
                while batch.count < Self.postBatchLimit, bytes < BusSubmission.batchPayloadBytes, isNextReady(), let request = next() {
                    batch.append(request)
                    bytes += request.payload.count
                }
                if inFlight >= concurrency, let result = await group.next() {
                    inFlight -= 1
                    take(result)
                }
                group.addTask { [self] in
                    do throws(HostFailure) { return .success(try post(batch)) } catch { return .failure(error) }
                }
                inFlight += 1
            }
            for await result in group { take(result) }
            return failure
        }
        if let failure { throw failure }
    }

    /// Posts a batch in one statement (a lone command as ``post(_:)`` does); each is `pending`,
    /// or `failed` if the bus could not keep it as it is (its outcomes come in the batch's order).
    private func post(_ batch: [CommandRequest]) throws(HostFailure) -> [CommandOutcome] {
        var outcomes: [CommandOutcome] = []
        var submissions: [BusSubmission] = []
        var positions: [Int] = []
        for request in batch {
            outcomes.append(CommandOutcome(tag: request.tag, command: request.name, state: .pending))
            do throws(HostFailure) {
                var submission = try Self.submission(request)
                submission.failIfUnhandled = false
                submissions.append(submission)
                positions.append(outcomes.count - 1)
            } catch {
                outcomes[outcomes.count - 1].state = .failed
                outcomes[outcomes.count - 1].error = (error.code.name, error.message)
            }
        }
        let ids: [UUID] = switch submissions.count {
        case 0: []
        case 1: [try submit(submissions[0])]
        default: try retrying { connection throws(PGError) in try BusSubmission.submitPosts(submissions, on: connection).map(\.id) }
        }
        for (position, id) in zip(positions, ids) { outcomes[position].id = id }
        return outcomes
    }

    package func sendAll(
        concurrency: Int, next: @escaping () -> CommandRequest?, onOutcome: @escaping (CommandOutcome) -> Void
    ) async throws(HostFailure) {
        try await forEach(concurrency: concurrency, next: next, onOutcome: onOutcome) { [self] request throws(HostFailure) in
            let submission: BusSubmission
            do throws(HostFailure) {
                submission = try Self.submission(request)
            } catch {
                // The line's own fault, not the bus's: the batch goes on.
                var outcome = CommandOutcome(tag: request.tag, command: request.name, state: .failed)
                outcome.error = (error.code.name, error.message)
                return outcome
            }
            let row = try await run(submission, onEvent: nil)
            var outcome = CommandOutcome(tag: request.tag, id: row.id, command: request.name, state: row.state)
            if row.state == .succeeded {
                outcome.result = row.result
            } else {
                outcome.error = (row.errorCode ?? "handlerFailed", row.errorMessage ?? "")
            }
            return outcome
        }
    }

    /// Runs `work` for each request `next` hands out, on up to `concurrency` tasks at once, and
    /// reports each outcome as it comes. A failure of `work` is the bus's, not its command's: no
    /// more requests are taken, and it is thrown once the tasks in flight have ended.
    private func forEach(
        concurrency: Int, next: @escaping () -> CommandRequest?, onOutcome: @escaping (CommandOutcome) -> Void,
        _ work: @escaping @Sendable (CommandRequest) async throws(HostFailure) -> CommandOutcome
    ) async throws(HostFailure) {
        let failure: HostFailure? = await withTaskGroup(of: Result<CommandOutcome, HostFailure>.self) { group in
            var inFlight = 0
            var failure: HostFailure?
            func take(_ result: Result<CommandOutcome, HostFailure>) {
                switch result {
                case .success(let outcome): onOutcome(outcome)
                case .failure(let error): failure = failure ?? error
                }
            }
            while failure == nil, let request = next() {
                if inFlight >= concurrency, let result = await group.next() {
                    inFlight -= 1
                    take(result)
                }
                group.addTask {
                    do throws(HostFailure) { return .success(try await work(request)) } catch { return .failure(error) }
                }
                inFlight += 1
            }
            for await result in group { take(result) }
            return failure
        }
        if let failure { throw failure }
    }

    package func canHandle(_ name: String, payload: Data) async throws(HostFailure) -> Bool {
        var submission = BusSubmission(name: name, payload: payload)
        submission.isProbe = true
        submission.maxAttempts = 1
        let row = try await run(submission, onEvent: nil)
        switch (row.state, row.errorCode) {
        case (.succeeded, _): return true
        case (_, "noHandler"?): return false
        default: throw HostFailure(HostFailure.Code(name: row.errorCode ?? "") ?? .handlerFailed, row.errorMessage ?? "", command: name)
        }
    }

    package func noHandler(_ command: String) -> HostFailure {
        HostFailure(.noHandler, "no handler for command \(quoted(command)) would take it now (no live host on the bus at \(redactedURL) takes it)", command: command)
    }

    package func cancel(_ id: UUID) async throws(HostFailure) -> Bool {
        do {
            return try BusJournal.cancel(id, on: connections)
        } catch {
            throw Self.failure(error)
        }
    }

    /// Of `names`, those no live (or late) host handles, sorted; none if the bus cannot be asked,
    /// since this is a warning's, after the posts are in.
    package func namesNoHostHandles(_ names: Set<String>) async -> [String] {
        guard !names.isEmpty else { return [] }
        let rows = try? connections.with { connection throws(PGError) in
            try connection.execute(BusSQL.namesNoHostHandles, [.textArray(names.sorted())])
        }
        return rows?.all.compactMap { $0.text("name") } ?? []
    }

    /// Of `names`, those paused on the bus, sorted; none if the bus cannot be asked, since this
    /// is a note's, beside a send or after the posts are in.
    package func namesPaused(_ names: Set<String>) async -> [String] {
        guard !names.isEmpty else { return [] }
        let rows = try? connections.with { connection throws(PGError) in
            try connection.execute("SELECT name FROM cmdbus.paused WHERE name = ANY($1::text[]) ORDER BY name", [.textArray(names.sorted())])
        }
        return rows?.all.compactMap { $0.text("name") } ?? []
    }

    /// Runs `body` on a connection; a failure is the one line `cmdbus` prints for it.
    func withConnection<T>(_ body: (PGConnection) throws(PGError) -> T) throws(HostFailure) -> T {
        do { return try connections.with(body) } catch { throw Self.failure(error) }
    }

    package func close() async {
        waiter.stop()
    }
}
