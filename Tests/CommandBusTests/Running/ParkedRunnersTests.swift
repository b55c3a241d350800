@testable import CommandBus
import Testing

/// Idle runners park rather than end, so a steady stream of posts does not start and release a
/// task each time the queue empties; a parked runner wakes for the next post, and ends with its bus.
struct ParkedRunnersTests {
    /// Posts spaced out so that the runners park between them: each is taken by a woken runner.
    /// A runner that never woke would leave its post waiting, and the time limit would fail the test.
    @Test(.timeLimit(.minutes(1)))
    func aPostAfterTheRunnersParkedStillRuns() async throws {
        let bus = CommandBus()
        bus.register(ClosureHandler<Work> { command, _ in command.value })
        for round in 0..<50 {
            #expect(try await bus.post(Work(value: round)).result == round)
            #expect(await waitUntil { bus.postRunners.runnerCounts.parked >= 1 })
        }
        #expect(bus.postRunners.runnerCounts.alive <= max(2, PostRunners.baseRunners))
    }

    @Test func parkedRunnersEndWithTheirBus() async throws {
        var bus: CommandBus? = CommandBus()
        bus?.register(ClosureHandler<Work> { command, _ in command.value })
        let pool = try #require(bus?.postRunners)
        do {
            // Tickets hold their contexts, and contexts their bus: these go before the bus does.
            let tickets = (0..<100).compactMap { bus?.post(Work(value: $0)) }
            for (index, ticket) in tickets.enumerated() { #expect(try await ticket.result == index) }
        }
        #expect(await waitUntil { pool.runnerCounts.parked >= 1 })
        bus = nil
        #expect(await waitUntil { pool.runnerCounts == (alive: 0, parked: 0) })
    }
}
