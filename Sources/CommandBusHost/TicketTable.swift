import CommandBus
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Tickets by command id, shared between threads: what a client may still cancel.
package final class TicketTable: Sendable {
    private let tickets = Mutex<[UUID: CommandTicket<Data>]>([:])

    /// An empty table.
    package init() {}

    /// Adds a ticket.
    package func insert(_ ticket: CommandTicket<Data>) { tickets.withLock { $0[ticket.id] = ticket } }
    /// Adds a ticket and takes it off when its command ends (at once if it has), with no task
    /// waiting for that: a server's posts, and what it recovered at start.
    package func track(_ ticket: CommandTicket<Data>) {
        insert(ticket)
        ticket.whenFinished { [self] _ in remove(ticket.id) }
    }
    /// Removes the ticket of command `id`.
    package func remove(_ id: UUID) { tickets.withLock { _ = $0.removeValue(forKey: id) } }
    /// The ticket of command `id`, if it is here.
    package func ticket(_ id: UUID) -> CommandTicket<Data>? { tickets.withLock { $0[id] } }
    /// Every ticket here.
    package var all: [CommandTicket<Data>] { tickets.withLock { Array($0.values) } }
}
