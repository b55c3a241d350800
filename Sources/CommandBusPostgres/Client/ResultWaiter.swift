import CommandBus
import CommandBusSupport
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Waits, on a thread and a connection of its own, for commands to reach a final state and for
/// their events: woken by `cmdbus_done` and `cmdbus_events` notifications, and checking every
/// watched command once a second besides, so a lost notification (or a reconnect) only delays.
package final class ResultWaiter: Sendable {
    private struct Watch {
        var onFinish: @Sendable (BusCommandRow) -> Void
        var correlation: UUID?
        var onEvent: (@Sendable ([String: JSONValue]) -> Void)?
    }
    private struct State {
        var watches: [UUID: Watch] = [:]
        var lastEventSeq: [UUID: Int64] = [:]
        var dirty: Set<UUID> = []
        var stopped = false
    }
    private let state = Mutex(State())
    private let wake = WakeSignal()
    private let url: String

    /// Starts waiting on `url`.
    package init(url: String) {
        self.url = url
        DetachedThread.start(named: "bus-results") { [self] in self.loop() }
    }

    /// Calls `onFinish` once command `id` is final; `onEvent` with each event of its correlation, in order, before that.
    package func watch(
        _ id: UUID, correlation: UUID? = nil, onEvent: (@Sendable ([String: JSONValue]) -> Void)? = nil,
        onFinish: @escaping @Sendable (BusCommandRow) -> Void
    ) {
        state.withLock { state in
            state.watches[id] = Watch(onFinish: onFinish, correlation: correlation, onEvent: onEvent)
            state.dirty.insert(id)
        }
        wake.signal()
    }

    /// Waits for command `id` to be final. Watch before submitting, so nothing is missed.
    package func result(of id: UUID, correlation: UUID? = nil, onEvent: (@Sendable ([String: JSONValue]) -> Void)? = nil) async -> BusCommandRow {
        await withUnsafeContinuation { continuation in
            watch(id, correlation: correlation, onEvent: onEvent) { row in continuation.resume(returning: row) }
        }
    }

    /// Stops watching `id` (its `onFinish` is never called).
    package func forget(_ id: UUID) {
        state.withLock { _ = $0.watches.removeValue(forKey: id) }
    }

    /// Stops the thread.
    package func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
    }

    private func loop() {
        let session = PGSession(url: url, listening: ["cmdbus_done", "cmdbus_events"], planning: .once)
        var lastFullCheck = ContinuousClock.now
        while !state.withLock({ $0.stopped }) {
            do {
                let notifications = try session.notifications(waitingUpTo: .milliseconds(250), wake: wake)
                let fullCheck = ContinuousClock.now - lastFullCheck > .seconds(1)
                if fullCheck { lastFullCheck = .now }
                let (ids, correlations) = state.withLock { state -> ([UUID], Set<UUID>) in
                    var ids = state.dirty
                    state.dirty = []
                    var correlations: Set<UUID> = []
                    for notification in notifications {
                        guard let id = UUID(uuidString: notification.payload) else { continue }
                        if notification.channel == "cmdbus_done", state.watches[id] != nil { ids.insert(id) }
                        if notification.channel == "cmdbus_events" { correlations.insert(id) }
                    }
                    if fullCheck { ids.formUnion(state.watches.keys) }
                    return (Array(ids), correlations)
                }
                try session.run { connection throws(PGError) in
                    try deliverEvents(for: correlations.union(eventCorrelations(of: ids)), on: connection)
                    guard !ids.isEmpty else { return }
                    let rows = try connection.execute(BusSQL.finished, [.uuidArray(ids)]).all.compactMap(BusCommandRow.init)
                    for row in rows { try finish(row, on: connection) }
                }
            } catch {
                session.backOff(wake: wake)
                state.withLock { $0.dirty.formUnion($0.watches.keys) }
            }
        }
    }

    /// The correlations of watched commands that follow events, among `ids`.
    private func eventCorrelations(of ids: [UUID]) -> Set<UUID> {
        state.withLock { state in Set(ids.compactMap { id in state.watches[id].flatMap { $0.onEvent == nil ? nil : $0.correlation } }) }
    }

    private func deliverEvents(for correlations: Set<UUID>, on connection: PGConnection) throws(PGError) {
        for correlation in correlations {
            let followers = state.withLock { state in state.watches.values.filter { $0.correlation == correlation }.compactMap(\.onEvent) }
            guard !followers.isEmpty else { continue }
            let after = state.withLock { $0.lastEventSeq[correlation] ?? 0 }
            let rows = try connection.execute(BusSQL.events, [.uuid(correlation), .integer(after)])
            var last = after
            for row in rows.all {
                last = max(last, row.integer("seq") ?? last)
                guard let text = row.text("event"), let event = JSONValue.parse(text)?.objectValue else { continue }
                for follower in followers { follower(event) }
            }
            state.withLock { $0.lastEventSeq[correlation] = last }
        }
    }

    /// Delivers the last events of a finished command, then its row.
    private func finish(_ row: BusCommandRow, on connection: PGConnection) throws(PGError) {
        let watch = state.withLock { $0.watches[row.id] }
        guard let watch else { return }
        if watch.onEvent != nil, let correlation = watch.correlation { try deliverEvents(for: [correlation], on: connection) }
        let removed = state.withLock { state -> Watch? in
            let removed = state.watches.removeValue(forKey: row.id)
            if let correlation = removed?.correlation, !state.watches.values.contains(where: { $0.correlation == correlation }) {
                state.lastEventSeq[correlation] = nil
            }
            return removed
        }
        removed?.onFinish(row)
    }
}
