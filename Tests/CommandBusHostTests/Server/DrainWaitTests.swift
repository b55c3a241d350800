import CommandBus
import CommandBusHost
import Foundation
import Testing

/// The waits a server's drain makes (no command in flight, no answer owed) and their release
/// at the drain's deadline. The drain waits for the one, then the other, and releases both at
/// its deadline: a task released from the first that came to the second after its release was
/// left waiting for ever, and the server with it, so a release holds for later waits too.
struct DrainWaitTests {
    @Test(.timeLimit(.minutes(1)))
    func aWaitThatComesAfterTheReleaseReturnsAtOnce() async {
        let statistics = BusStatistics()
        statistics.commandAccepted(CommandEnvelope(commandName: "c"))
        statistics.releaseIdleWaiters()
        await statistics.waitUntilIdle()

        let bus = CommandBus()
        let table = TicketTable()
        table.insert(bus.post(name: "nobody.handles", payload: Data("{}".utf8)))
        table.releaseEmptyWaiters()
        await table.waitUntilEmpty()
    }

    @Test(.timeLimit(.minutes(1)))
    func aWaiterIsResumedWhenItsConditionComesToHoldOrWhenReleased() async {
        let statistics = BusStatistics()
        let envelope = CommandEnvelope(commandName: "c")
        statistics.commandAccepted(envelope)
        async let idle: Void = statistics.waitUntilIdle()
        try? await Task.sleep(for: .milliseconds(50))
        statistics.commandFinished(envelope, state: .succeeded, error: nil)
        await idle

        let bus = CommandBus()
        let table = TicketTable()
        let ticket = bus.post(name: "nobody.handles", payload: Data("{}".utf8))
        table.insert(ticket)
        async let empty: Void = table.waitUntilEmpty()
        try? await Task.sleep(for: .milliseconds(50))
        table.remove(ticket.id)
        await empty

        table.insert(ticket)
        async let released: Void = table.waitUntilEmpty()
        try? await Task.sleep(for: .milliseconds(50))
        table.releaseEmptyWaiters()
        await released
        #expect(table.ticket(ticket.id) != nil, "a release ends the waits, not the table's contents")
    }
}
