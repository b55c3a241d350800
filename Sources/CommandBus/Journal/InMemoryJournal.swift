#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// A journal in memory: for tests, and for buses that want the journal's bookkeeping without durability.
public final class InMemoryJournal: Journal {
    private struct State {
        var records: [UUID: JournalRecord] = [:]
        var order: [UUID] = []
        var nextSequence: Int64 = 1
    }
    private let state = Mutex(State())

    /// Creates an empty journal.
    public init() {}

    /// Stores the command as pending (or marks a known one pending again).
    public func accept(_ envelope: CommandEnvelope, payload: Data) async throws(CommandBusError) {
        state.withLock { state in
            if var existing = state.records[envelope.id] {
                existing.state = .pending
                existing.updatedAt = Date()
                state.records[envelope.id] = existing
                return
            }
            state.records[envelope.id] = JournalRecord(sequence: state.nextSequence, envelope: envelope, payload: payload)
            state.order.append(envelope.id)
            state.nextSequence += 1
        }
    }

    /// Applies the transition; a terminal state only replaces pending or running.
    public func update(_ update: JournalUpdate, waitUntilDurable: Bool) async throws(CommandBusError) {
        state.withLock { state in
            guard var record = state.records[update.id], !record.state.isTerminal else { return }
            record.state = update.state
            record.attempts = max(record.attempts, update.attempts)
            record.result = update.result
            record.errorCode = update.errorCode
            record.errorMessage = update.errorMessage
            record.updatedAt = update.at
            state.records[update.id] = record
        }
    }

    /// The record of `id`.
    public func record(_ id: UUID) async throws(CommandBusError) -> JournalRecord? {
        state.withLock { $0.records[id] }
    }

    /// The records matching `query`, in order.
    public func records(_ query: JournalQuery) async throws(CommandBusError) -> [JournalRecord] {
        state.withLock { state in
            var matching = state.order.compactMap { state.records[$0] }.filter(query.matches)
            if query.newestFirst { matching.reverse() }
            return query.limit.map { Array(matching.prefix($0)) } ?? matching
        }
    }

    /// Every pending or running record (in memory, no other process can own them).
    public func unfinished() async throws(CommandBusError) -> [JournalRecord] {
        try await records(JournalQuery(states: [.pending, .running]))
    }

    /// Marks the record failed with `error`, whatever its state.
    public func markFailed(_ id: UUID, error: CommandBusError) async throws(CommandBusError) {
        state.withLock { state in
            state.records[id]?.state = .failed
            state.records[id]?.errorCode = error.code.description
            state.records[id]?.errorMessage = error.message
        }
    }

    /// Links `undo` to `original`.
    public func linkUndo(_ undo: UUID, of original: UUID) async throws(CommandBusError) {
        state.withLock { state in
            state.records[original]?.undoneBy = undo
            state.records[undo]?.undoOf = original
        }
    }

    /// Marks `id` as taken out of replay.
    public func setExcluded(_ id: UUID, _ excluded: Bool) async throws(CommandBusError) {
        state.withLock { $0.records[id]?.excluded = excluded }
    }
}
