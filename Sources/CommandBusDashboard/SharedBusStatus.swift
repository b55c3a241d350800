import CommandBus
import Synchronization

/// The shared bus's status as the hosts page and `/metrics` show it: read from PostgreSQL at
/// most once in ``freshFor`` however many pages and scrapers ask, and by one read at a time,
/// which the others wait for.
///
/// Each open hosts page asks every 2 s, and a read counts every name's pending commands: 0.3 s
/// of the database's time at 600,000 pending, during a backlog, when people watch. Five pages
/// asked for 0.75 s of it each second; now at most 0.3. An action taken from the dashboard
/// (pause, a limit, a periodic entry's change) forgets the status it read, so the page shows
/// the action at once.
package final class SharedBusStatus: Sendable {
    /// How long a status read is shown before it is read again.
    package static let freshFor = Duration.seconds(1)

    private let read: @Sendable () async -> JSONValue?
    private struct State {
        var value: JSONValue?
        var readAt: ContinuousClock.Instant?
        var reading: Task<JSONValue?, Never>?
        /// Counts the forgettings, so a read begun before one is not kept after it.
        var generation = 0
    }
    private let state = Mutex(State())

    /// A status read by `read`.
    package init(read: @escaping @Sendable () async -> JSONValue?) {
        self.read = read
    }

    /// The status: the last read if it is fresh, else the read under way, else a new one.
    package func current() async -> JSONValue? {
        enum Next { case fresh(JSONValue?), wait(Task<JSONValue?, Never>) }
        let next = state.withLock { state -> Next in
            if let readAt = state.readAt, ContinuousClock.now - readAt < Self.freshFor { return .fresh(state.value) }
            if let reading = state.reading { return .wait(reading) }
            let generation = state.generation
            let reading = Task { [read] () -> JSONValue? in
                let value = await read()
                self.keep(value, readIn: generation)
                return value
            }
            state.reading = reading
            return .wait(reading)
        }
        switch next {
        case .fresh(let value): return value
        case .wait(let reading): return await reading.value
        }
    }

    /// Forgets the status read, and any read under way: the next ask reads anew.
    package func forget() {
        state.withLock { state in
            state.generation += 1
            state.readAt = nil
            state.value = nil
            state.reading = nil
        }
    }

    private func keep(_ value: JSONValue?, readIn generation: Int) {
        state.withLock { state in
            guard state.generation == generation else { return }
            state.value = value
            state.readAt = .now
            state.reading = nil
        }
    }
}
