import CommandBusSupport
import CommandBus
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Counts and latencies of the commands a bus ran, for `status`.
package final class BusStatistics: CommandObserver {
    private struct State {
        package var started: [UUID: ContinuousClock.Instant] = [:]
        package var completed = 0
        package var failed = 0
        /// Per command name (``CountedName``).
        package var names: [String: NameFigures] = [:]
        /// Waiting for nothing to be in flight.
        var idleWaiters = ConditionWaiters()
    }
    private let state = Mutex(State())

    /// How many commands of one name ran, and the latest latencies (ms), at most ``window``.
    private struct NameFigures {
        var runs = 0
        var latencies = BoundedRing<Double>(capacity: BusStatistics.window)

        mutating func record(_ milliseconds: Double) {
            runs += 1
            latencies.append(milliseconds)
        }
    }

    /// Statistics with nothing counted yet.
    package init() {}
    package static let window = 1_000

    package func commandAccepted(_ envelope: CommandEnvelope) {
        state.withLock { $0.started[envelope.id] = .now }
    }

    package func commandFinished(_ envelope: CommandEnvelope, state ended: CommandState, error: CommandBusError?) {
        let now = ContinuousClock.now
        let idle = state.withLock { state -> [UnsafeContinuation<Void, Never>] in
            guard let start = state.started.removeValue(forKey: envelope.id) else { return [] }
            if ended == .succeeded { state.completed += 1 } else { state.failed += 1 }
            let ms = (now - start).seconds * 1000
            let name = CountedName.of(envelope.commandName, error: error, isCounted: { state.names[$0] != nil }, names: state.names.count)
            // In place: the ring is not copied out of the dictionary and back.
            state.names[name, default: NameFigures()].record(ms)
            return state.started.isEmpty ? state.idleWaiters.takeAll() : []
        }
        for waiter in idle { waiter.resume() }
    }

    /// Returns once no command is in flight (at once if none is), or once ``releaseIdleWaiters()`` has been called.
    package func waitUntilIdle() async {
        await state.wait(on: \.idleWaiters) { $0.started.isEmpty }
    }

    /// Resumes whoever waits for idleness, now and from now on (a drain that gave up waiting).
    package func releaseIdleWaiters() {
        for waiter in state.withLock({ $0.idleWaiters.giveUp() }) { waiter.resume() }
    }

    /// Commands accepted and not finished.
    package var inFlight: Int { state.withLock { $0.started.count } }

    /// How many commands succeeded and how many did not, without the latency summary's sorting.
    package var counts: (completed: Int, failed: Int) { state.withLock { ($0.completed, $0.failed) } }

    /// One line of the work so far, for a service manager's status: `3 plugins, 2 in flight,
    /// 1204 succeeded, 3 failed`.
    package func workSummary(plugins: Int, quarantined: Int = 0) -> String {
        let (inFlight, completed, failed) = state.withLock { ($0.started.count, $0.completed, $0.failed) }
        return "\(counted(plugins, "plugin"))\(quarantined > 0 ? " (\(quarantined) quarantined)" : ""), \(inFlight) in flight, \(completed) succeeded, \(failed) failed"
    }

    /// The ids of the commands accepted and not finished.
    package var inFlightIDs: [UUID] { state.withLock { Array($0.started.keys) } }

    /// The `status` figures.
    package func summary(uptime: Duration, plugins: Int) -> JSONValue {
        state.withLock { state in
            // Latencies are kept in milliseconds; given to the microsecond (roundedMilliseconds takes seconds).
            func percentile(_ values: [Double], _ p: Double) -> Double {
                let sorted = values.sorted()
                return roundedMilliseconds(sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))] / 1000)
            }
            let commands = state.names.mapValues { counts -> JSONValue in
                let values = counts.latencies.elements
                return .object(["count": .integer(Int64(counts.runs)), "p50Ms": .number(percentile(values, 0.5)), "p99Ms": .number(percentile(values, 0.99))])
            }
            return .object([
                "uptimeSeconds": .number(roundedSeconds(uptime.seconds)),
                "plugins": .integer(Int64(plugins)), "inFlight": .integer(Int64(state.started.count)),
                "completed": .integer(Int64(state.completed)), "failed": .integer(Int64(state.failed)),
                "commands": .object(commands),
            ])
        }
    }
}
