import CommandBus
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Tickets by command id, shared between threads: what a client may still cancel, and what a
/// server still owes an answer (a drain waits for the table to empty, ``waitUntilEmpty()``).
package final class TicketTable: Sendable {
    private struct State {
        var tickets: [UUID: CommandTicket<Data>] = [:]
        var emptyWaiters = ConditionWaiters()
    }

    private let state = Mutex(State())

    /// An empty table.
    package init() {}

    /// Adds a ticket.
    package func insert(_ ticket: CommandTicket<Data>) { state.withLock { $0.tickets[ticket.id] = ticket } }
    /// Adds a ticket and takes it off when its command ends (at once if it has), with no task
    /// waiting for that: a server's posts, and what it recovered at start.
    package func track(_ ticket: CommandTicket<Data>) {
        insert(ticket)
        ticket.whenFinished { [self] _ in remove(ticket.id) }
    }
    /// Removes the ticket of command `id`; the table's last wakes whoever waits for it to empty.
    package func remove(_ id: UUID) {
        let waiters = state.withLock { state -> [UnsafeContinuation<Void, Never>] in
            _ = state.tickets.removeValue(forKey: id)
            return state.tickets.isEmpty ? state.emptyWaiters.takeAll() : []
        }
        for waiter in waiters { waiter.resume() }
    }
    /// The ticket of command `id`, if it is here.
    package func ticket(_ id: UUID) -> CommandTicket<Data>? { state.withLock { $0.tickets[id] } }
    /// Every ticket here.
    package var all: [CommandTicket<Data>] { state.withLock { Array($0.tickets.values) } }

    /// Returns once the table is empty (at once if it is), or once ``releaseEmptyWaiters()`` has been called.
    package func waitUntilEmpty() async {
        await state.wait(on: \.emptyWaiters) { $0.tickets.isEmpty }
    }

    /// Resumes whoever waits for the table to empty, now and from now on (a drain that gave up waiting).
    package func releaseEmptyWaiters() {
        for waiter in state.withLock({ $0.emptyWaiters.giveUp() }) { waiter.resume() }
    }
}
