import CommandBus
import CommandBusLoading
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The bus in this process: a ``HostSession`` (plugins loaded here, the journal opened here)
/// behind the ``BusClient`` seam.
package struct LocalBusClient: BusClient {
    /// The session the client drives.
    package let session: HostSession
    private let statistics: BusStatistics
    private let running = TicketTable()
    private let started = ContinuousClock.now

    /// A client over a session started with `statistics` among its observers.
    package init(session: HostSession, statistics: BusStatistics) {
        self.session = session
        self.statistics = statistics
    }

    /// Starts a session as the options say and wraps it.
    package static func start(
        plugins: PluginOptions, journal: JournalOptions, console: Console, reportSkipped: Bool = true, usesAllowlist: Bool = true
    ) async throws(HostFailure) -> LocalBusClient {
        let statistics = BusStatistics()
        let session = try await HostSession.start(
            plugins: plugins, journal: journal, console: console, reportSkipped: reportSkipped, usesAllowlist: usesAllowlist,
            observers: [statistics]
        )
        return LocalBusClient(session: session, statistics: statistics)
    }

    package func send(_ request: CommandRequest, onEvent: (@Sendable ([String: JSONValue]) -> Void)?) async throws(HostFailure) -> Data {
        if let delay = request.delay { try? await Task.sleep(for: delay) }
        // Subscribed before the command starts, so none of its events is missed, and to its own
        // tree's alone (the server's reason: a busy bus's every event is not this command's).
        let envelope = onEvent.map { _ in CommandEnvelope(commandName: request.name, metadata: request.metadata) }
        let events = envelope.map { session.bus.events(matching: .correlation($0.id), bufferingPolicy: .unbounded) }
        let ticket = session.bus.post(
            name: request.name, payload: request.payload, metadata: request.metadata, timeout: request.timeout, envelope: envelope, preferring: nil
        )
        running.insert(ticket)
        defer { running.remove(ticket.id) }
        let forwarding = events.map { stream in
            Task { await stream.follow(ticket.id) { event in onEvent?(event.json.objectValue ?? [:]) } }
        }
        let result: Result<Data, CommandBusError>
        do {
            // Cancelling the caller (Ctrl-C) cancels the command and, through it, its subcommands.
            result = .success(try await Self.result(of: ticket))
        } catch {
            result = .failure(error)
        }
        await forwarding?.value
        switch result {
        case .success(let data): return data
        case .failure(let error): throw session.failure(error, command: request.name)
        }
    }

    /// The ticket's result; cancelling the waiting task cancels the command.
    private static func result(of ticket: CommandTicket<Data>) async throws(CommandBusError) -> Data {
        let outcome: Result<Data, CommandBusError> = await withTaskCancellationHandler {
            do throws(CommandBusError) {
                return .success(try await ticket.result)
            } catch {
                return .failure(error)
            }
        } onCancel: {
            ticket.cancel()
        }
        return try outcome.get()
    }

    package func post(_ request: CommandRequest) async throws(HostFailure) -> UUID {
        let ticket = session.bus.post(name: request.name, payload: request.payload, metadata: request.metadata, timeout: request.timeout)
        running.insert(ticket)
        Task { [running] in
            _ = try? await ticket.result
            running.remove(ticket.id)
        }
        return ticket.id
    }

    /// Posts each command as ``post(_:)`` does, which never waits: `concurrency` does not apply.
    package func postAll(
        concurrency: Int, next: @escaping () -> CommandRequest?, isNextReady: @escaping () -> Bool,
        onOutcome: @escaping (CommandOutcome) -> Void
    ) async throws(HostFailure) {
        while let request = next() {
            onOutcome(CommandOutcome(tag: request.tag, id: try await post(request), command: request.name, state: .pending))
        }
    }

    package func sendAll(
        concurrency: Int, next: @escaping () -> CommandRequest?, onOutcome: @escaping (CommandOutcome) -> Void
    ) async throws(HostFailure) {
        let bus = session.bus
        await withTaskGroup(of: CommandOutcome.self) { group in
            var inFlight = 0
            while !Task.isCancelled, let request = next() {
                if inFlight >= concurrency, let outcome = await group.next() {
                    inFlight -= 1
                    onOutcome(outcome)
                }
                group.addTask {
                    let ticket = bus.post(name: request.name, payload: request.payload, metadata: request.metadata, timeout: request.timeout)
                    var outcome = CommandOutcome(tag: request.tag, id: ticket.id, command: request.name, state: .succeeded)
                    do throws(CommandBusError) {
                        outcome.result = try await Self.result(of: ticket)
                    } catch {
                        outcome.error = (HostFailure.Code(error).name, error.message)
                    }
                    outcome.state = ticket.state
                    return outcome
                }
                inFlight += 1
            }
            for await outcome in group { onOutcome(outcome) }
        }
    }

    package func canHandle(_ name: String, payload: Data) async throws(HostFailure) -> Bool {
        do {
            // The full answer: an isolated plugin's can_handle() is asked in its worker.
            return try await session.bus.wouldHandle(name: name, payload: payload)
        } catch {
            throw session.failure(error, command: name)
        }
    }

    package func noHandler(_ command: String) -> HostFailure {
        session.failure(.noHandler(command, registered: session.bus.handlerCount(for: command)), command: command)
    }

    package func cancel(_ id: UUID) async throws(HostFailure) -> Bool {
        guard let ticket = running.ticket(id) else { return false }
        ticket.cancel()
        return true
    }

    package func plugins() async throws(HostFailure) -> JSONValue {
        session.catalog.json
    }

    package func status() async throws(HostFailure) -> JSONValue {
        statistics.summary(uptime: .now - started, plugins: session.catalog.plugins.count)
    }

    /// Waits for the journal, and stops this session's worker processes: a one-shot host leaves none behind.
    ///
    /// What still runs now (a subcommand whose handler ignored its parent's timeout or
    /// cancellation) dies with this process, so the journal records it cancelled, saying so,
    /// rather than leaving it `running` for a later process to misread.
    package func close() async {
        if let journal = session.journal {
            let leftBehind = CommandBusError(code: .cancelled, message: "still running when cmdbus exited: the command it belonged to had ended")
            for id in statistics.inFlightIDs {
                try? await journal.update(JournalUpdate(id: id, state: .cancelled, attempts: 1, error: leftBehind), waitUntilDurable: false)
            }
        }
        await session.close()
        session.catalog.stopWorkers()
    }
}
