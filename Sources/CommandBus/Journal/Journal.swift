#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Durable storage for commands: what makes a bus survive a crash, replay its history, undo and sync.
///
/// A bus with a journal writes each command ahead: it is ``accept(_:payload:)``ed, and durable,
/// before it is scheduled; every transition after that is an ``update(_:waitUntilDurable:)``.
/// ```swift
/// let bus = CommandBus(configuration: .init(journal: InMemoryJournal()))
/// try await bus.recover()       // runs again whatever a crash left pending or running
/// ```
public protocol Journal: Sendable {
    /// Stores a newly accepted command as `pending`, or, for one it already holds (a recovery,
    /// a retry), marks it `pending` again. Returns once the record is durable.
    /// - Throws: ``CommandBusError`` with code `journalFailed`.
    func accept(_ envelope: CommandEnvelope, payload: Data) async throws(CommandBusError)

    /// Whether ``accept(_:payload:whenDurable:)`` queues the write-ahead and returns, calling back
    /// from the journal's own thread: then the bus writes a posted command ahead as it is posted,
    /// and queues it to run once that is durable, so a burst of posts holds no task or runner per
    /// write-ahead. `false` by default: the bus writes a posted command ahead from the runner
    /// that takes it, with ``accept(_:payload:)``. A bus asks once, when it is made.
    var queuesWriteAheads: Bool { get }

    /// Stores a newly accepted command as ``accept(_:payload:)`` does, without waiting:
    /// `whenDurable` is called once it is durable (or could not be made so). The default runs
    /// ``accept(_:payload:)`` in a task.
    func accept(_ envelope: CommandEnvelope, payload: Data, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void)

    /// Records a transition. A terminal state is recorded only over `pending` or `running`,
    /// so the first way a command ended wins.
    /// - Parameter waitUntilDurable: Return only once the update is durable; otherwise it is queued in order.
    func update(_ update: JournalUpdate, waitUntilDurable: Bool) async throws(CommandBusError)

    /// Records a transition without waiting: `whenDurable` is called once it is durable (or
    /// could not be made so). The default runs ``update(_:waitUntilDurable:)`` in a task.
    func update(_ update: JournalUpdate, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void)

    /// One command's record, if the journal holds it.
    func record(_ id: UUID) async throws(CommandBusError) -> JournalRecord?

    /// Records matching `query`, in journal order.
    func records(_ query: JournalQuery) async throws(CommandBusError) -> [JournalRecord]

    /// The commands a dead process left `pending` or `running`, in journal order. A journal
    /// shared by several live processes leaves out those of processes still running.
    func unfinished() async throws(CommandBusError) -> [JournalRecord]

    /// Records, after the fact, that a command's entry is no good: a replay found its payload stale.
    func markFailed(_ id: UUID, error: CommandBusError) async throws(CommandBusError)

    /// Links an undo to the command it undid.
    func linkUndo(_ undo: UUID, of original: UUID) async throws(CommandBusError)

    /// Takes a command out of replay (or puts it back).
    func setExcluded(_ id: UUID, _ excluded: Bool) async throws(CommandBusError)
}

extension CommandBusError {
    /// The journal at `location` could not be read or written.
    public static func journalFailed(_ location: String, _ problem: String, fileID: String = #fileID, line: Int = #line) -> Self {
        .init(code: .journalFailed, message: "journal \(location): \(problem)", fileID: fileID, line: line)
    }
}

extension Journal {
    /// `false`: a posted command is written ahead by the runner that takes it.
    public var queuesWriteAheads: Bool { false }

    /// Runs ``accept(_:payload:)`` in a task and reports its outcome.
    public func accept(_ envelope: CommandEnvelope, payload: Data, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        reportInTask(to: whenDurable) { () async throws(CommandBusError) in try await self.accept(envelope, payload: payload) }
    }

    /// Runs ``update(_:waitUntilDurable:)`` in a task and reports its outcome.
    public func update(_ update: JournalUpdate, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        reportInTask(to: whenDurable) { () async throws(CommandBusError) in try await self.update(update, waitUntilDurable: true) }
    }
}

/// Runs `write` in a task and tells `whenDurable` how it went: the default of a journal's
/// writes that report durability instead of being awaited.
private func reportInTask(
    to whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void,
    _ write: @escaping @Sendable () async throws(CommandBusError) -> Void
) {
    Task {
        do throws(CommandBusError) {
            try await write()
            whenDurable(.success(()))
        } catch {
            whenDurable(.failure(error))
        }
    }
}
