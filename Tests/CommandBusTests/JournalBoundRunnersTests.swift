@testable import CommandBus
import Foundation
import Synchronization
import Testing

/// Runners that wait for the journal grow the pool only to ``PostRunners/journalBoundRunners``;
/// runners held by handlers still grow it as far as the commands waiting.
struct JournalBoundRunnersTests {
    /// An in-memory journal whose write-aheads wait until `gate` opens, as a slow disk would hold them.
    final class GatedJournal: Journal {
        let gate = Gate()
        let accepted = Atomic<Int>(0)
        private let stored = InMemoryJournal()

        func accept(_ envelope: CommandEnvelope, payload: Data) async throws(CommandBusError) {
            accepted.add(1, ordering: .relaxed)
            await gate.wait()
            try await stored.accept(envelope, payload: payload)
        }

        func update(_ update: JournalUpdate, waitUntilDurable: Bool) async throws(CommandBusError) {
            try await stored.update(update, waitUntilDurable: waitUntilDurable)
        }

        func record(_ id: UUID) async throws(CommandBusError) -> JournalRecord? { try await stored.record(id) }
        func records(_ query: JournalQuery) async throws(CommandBusError) -> [JournalRecord] { try await stored.records(query) }
        func unfinished() async throws(CommandBusError) -> [JournalRecord] { try await stored.unfinished() }
        func markFailed(_ id: UUID, error: CommandBusError) async throws(CommandBusError) { try await stored.markFailed(id, error: error) }
        func linkUndo(_ undo: UUID, of original: UUID) async throws(CommandBusError) { try await stored.linkUndo(undo, of: original) }
        func setExcluded(_ id: UUID, _ excluded: Bool) async throws(CommandBusError) { try await stored.setExcluded(id, excluded) }
    }

    /// Twice the limit of posts, all held in the write-ahead: the pool stops at the limit, and
    /// every command still runs once the journal lets them through.
    @Test(.timeLimit(.minutes(1)))
    func runnersWaitingForTheJournalStopAtTheLimit() async throws {
        let journal = GatedJournal()
        let bus = CommandBus(configuration: .init(journal: journal))
        bus.register(ClosureHandler<Work> { command, _ in command.value })
        let count = 2 * PostRunners.journalBoundRunners
        let tickets = (0..<count).map { bus.post(Work(value: $0)) }
        #expect(await waitUntil { journal.accepted.load(ordering: .relaxed) >= PostRunners.journalBoundRunners })
        // Many supervisor ticks: without the limit the pool would double to one runner per post.
        try await Task.sleep(for: .milliseconds(100))
        #expect(bus.postRunners.runnerCounts.alive <= PostRunners.journalBoundRunners)
        #expect(journal.accepted.load(ordering: .relaxed) <= PostRunners.journalBoundRunners)

        journal.gate.open()
        for (index, ticket) in tickets.enumerated() { #expect(try await ticket.result == index) }
    }

    /// On a journaled bus, handlers that each wait until all have started, more of them than the
    /// limit: they finish only if the pool grows past it, as a task per command would.
    @Test(.timeLimit(.minutes(1)))
    func runnersHeldByHandlersGrowPastTheLimit() async throws {
        let count = PostRunners.journalBoundRunners + 200
        let bus = CommandBus(configuration: .init(journal: InMemoryJournal()))
        bus.register(handlerWaitingForAll(count))
        let tickets = (0..<count).map { bus.post(Work(value: $0)) }
        for (index, ticket) in tickets.enumerated() { #expect(try await ticket.result == index) }
    }
}
