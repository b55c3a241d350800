@testable import CommandBus
import Foundation
import Synchronization
import Testing

/// Runners that wait for the journal grow the pool only to ``PostRunners/journalBoundRunners``;
/// runners held by handlers still grow it as far as the commands waiting.
struct JournalBoundRunnersTests {
    /// An in-memory journal whose write-aheads wait until `gate` opens, as a slow disk would hold them.
    final class GatedJournal: ForwardingJournal, @unchecked Sendable {
        let gate = Gate()
        let accepted = Atomic<Int>(0)

        override func accept(_ envelope: CommandEnvelope, payload: Data) async throws(CommandBusError) {
            accepted.add(1, ordering: .relaxed)
            await gate.wait()
            try await inner.accept(envelope, payload: payload)
        }
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
