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
        var events: [UUID: [JSONValue]] = [:]
        var order: [UUID] = []
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
        var json = event.json
        if case .object(var fields) = json {
            fields["time"] = .number(event.timestamp.timeIntervalSince1970)
            json = .object(fields)
        }
        state.withLock { state in
            let id = event.commandID
            if state.events[id] == nil {
                state.order.append(id)
                if state.order.count > Self.maxCommands {
                    let forgotten = state.order.removeFirst()
                    state.events[forgotten] = nil
                }
            }
            var list = state.events[id, default: []]
            guard list.count < Self.maxEventsPerCommand else { return }
            list.append(json)
            state.events[id] = list
        }
    }

    /// The events kept for command `id`, oldest first.
    package func events(of id: UUID) -> [JSONValue] {
        state.withLock { $0.events[id] ?? [] }
    }
}
