import CommandBus
import Foundation
import Synchronization

struct Greet: Command {
    typealias Result = Greeting
    static let name = "greet"
    var name: String
}

struct Greeting: Codable, Sendable, Equatable {
    var greeting: String
}

struct GreetHandler: CommandHandler {
    var prefix = "Hello"
    func canHandle(_ command: Greet) -> Bool { !command.name.isEmpty }
    func handle(_ command: Greet, context: CommandContext) async throws -> Greeting {
        Greeting(greeting: "\(prefix), \(command.name)!")
    }
}

/// A command whose handler does whatever the test tells it to.
struct Work: Command {
    typealias Result = Int
    static let name = "work"
    var value: Int
}

struct Failure: Error, CustomStringConvertible {
    var description: String
}

struct TransientFailure: RetryableError {}

/// A handler built from a closure, for tests that need bespoke behaviour.
struct ClosureHandler<C: Command>: CommandHandler {
    var maxConcurrency: Int?
    var accepts: @Sendable (C) -> Bool = { _ in true }
    let body: @Sendable (C, CommandContext) async throws -> C.Result

    init(
        maxConcurrency: Int? = nil,
        accepts: @escaping @Sendable (C) -> Bool = { _ in true },
        _ body: @escaping @Sendable (C, CommandContext) async throws -> C.Result
    ) {
        self.maxConcurrency = maxConcurrency
        self.accepts = accepts
        self.body = body
    }

    func canHandle(_ command: C) -> Bool { accepts(command) }
    func handle(_ command: C, context: CommandContext) async throws -> C.Result {
        try await body(command, context)
    }
}

/// A handler for `Work` that returns its value only once `count` handlers have started, so a
/// burst of `count` posts finishes only if that many commands run side by side.
func handlerWaitingForAll(_ count: Int) -> ClosureHandler<Work> {
    let started = Atomic<Int>(0)
    return ClosureHandler<Work> { command, _ in
        started.add(1, ordering: .relaxed)
        while started.load(ordering: .relaxed) < count { try await Task.sleep(for: .milliseconds(2)) }
        return command.value
    }
}

/// Counts how many run at once and remembers the most.
final class InFlightGauge: Sendable {
    private let state = Mutex((current: 0, peak: 0))
    var peak: Int { state.withLock { $0.peak } }
    func enter() { state.withLock { $0.current += 1; $0.peak = max($0.peak, $0.current) } }
    func leave() { state.withLock { $0.current -= 1 } }
}

/// A one-shot flag a test can wait on with a bound.
final class Signal: Sendable {
    private let fired = Atomic<Bool>(false)
    var isFired: Bool { fired.load(ordering: .acquiring) }
    func fire() { fired.store(true, ordering: .releasing) }
}

/// Waits until `condition` holds, polling, for at most `timeout`.
func waitUntil(
    _ timeout: Duration = .seconds(60),
    _ condition: @Sendable () -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return condition()
}

func json(_ text: String) -> Data { Data(text.utf8) }

func decodeJSON(_ data: Data) throws -> [String: Any] {
    try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
}

/// A journal that hands everything to an in-memory one: tests subclass it and override the one
/// or two writes whose timing they hold or watch. Every requirement is implemented here, even
/// those with a default, so that an override is what the bus calls.
class ForwardingJournal: Journal, @unchecked Sendable {
    let inner = InMemoryJournal()

    var queuesWriteAheads: Bool { false }
    func accept(_ envelope: CommandEnvelope, payload: Data) async throws(CommandBusError) { try await inner.accept(envelope, payload: payload) }
    func accept(_ envelope: CommandEnvelope, payload: Data, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        inner.accept(envelope, payload: payload, whenDurable: whenDurable)
    }
    func update(_ update: JournalUpdate, waitUntilDurable: Bool) async throws(CommandBusError) {
        try await inner.update(update, waitUntilDurable: waitUntilDurable)
    }
    func update(_ update: JournalUpdate, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        inner.update(update, whenDurable: whenDurable)
    }
    func record(_ id: UUID) async throws(CommandBusError) -> JournalRecord? { try await inner.record(id) }
    func records(_ query: JournalQuery) async throws(CommandBusError) -> [JournalRecord] { try await inner.records(query) }
    func unfinished() async throws(CommandBusError) -> [JournalRecord] { try await inner.unfinished() }
    func markFailed(_ id: UUID, error: CommandBusError) async throws(CommandBusError) { try await inner.markFailed(id, error: error) }
    func linkUndo(_ undo: UUID, of original: UUID) async throws(CommandBusError) { try await inner.linkUndo(undo, of: original) }
    func setExcluded(_ id: UUID, _ excluded: Bool) async throws(CommandBusError) { try await inner.setExcluded(id, excluded) }
}
