import CommandBusSupport
import CommandBusHost
import CommandBus
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The recent events of recent commands (state changes, progress, emitted events, log lines),
/// kept in memory for the command page. The journal keeps what lasts; this keeps what is told.
package final class CommandEventLog: Sendable {
    /// Commands whose events are kept; the oldest is forgotten first.
    package static let maxCommands = 5_000
    /// Events kept per command.
    package static let maxEventsPerCommand = 200

    private struct State {
        /// The events as the bus told them: made into JSON only for a page that asks, not at
        /// each event, which cost a busy server a tenth of its time.
        var events: [UUID: [CommandEvent]] = [:]
        /// The commands kept, oldest first: the one a new command pushes out is forgotten.
        var order = BoundedRing<UUID>(capacity: CommandEventLog.maxCommands)
    }
    private let state = Mutex(State())

    /// A log that follows `bus` from now on, with one subscription for every page.
    package init(following bus: CommandBus) {
        let stream = bus.events(bufferingPolicy: .bufferingNewest(10_000))
        Task { [weak self] in
            for await event in stream {
                guard let self else { return }
                self.record(event)
            }
        }
    }

    private func record(_ event: CommandEvent) {
        state.withLock { state in
            let id = event.commandID
            if state.events[id] == nil, let forgotten = state.order.append(id) {
                state.events[forgotten] = nil
            }
            // In place: the list is not copied out of the dictionary and back.
            guard state.events[id, default: []].count < Self.maxEventsPerCommand else { return }
            state.events[id, default: []].append(event)
        }
    }

    /// The events kept for command `id`, oldest first.
    package func events(of id: UUID) -> [JSONValue] {
        let events = state.withLock { $0.events[id] ?? [] }
        return events.map { event in
            guard case .object(var fields) = event.json else { return event.json }
            fields["time"] = .number(event.timestamp.timeIntervalSince1970)
            return .object(fields)
        }
    }
}
