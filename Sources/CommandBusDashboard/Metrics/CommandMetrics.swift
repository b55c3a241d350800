import CommandBusSupport
import CommandBusHost
import CommandBus
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the dashboard and `/metrics` count: commands by name and outcome, their durations as
/// histograms, what is in flight, a per-second history for the live chart, and journal commits.
///
/// It is a ``CommandObserver``: an atomic count when a command is accepted, one lock when it ends
/// (the bus says how long it took, so no start time is kept per command).
package final class CommandMetrics: CommandObserver {
    /// The upper bounds (seconds) of the duration histograms' buckets.
    package static let bucketBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
    /// Seconds of history the live chart can show.
    package static let historySeconds = 300
    /// How many ended commands the live feed keeps.
    package static let recentEndings = 1_000
    /// Counts for one command name.
    package struct NameCounts: Sendable {
        package var outcomes: [CommandState: Int] = [:]
        package var histogram = Histogram()

        /// Counts one command that ended `state` after `seconds`.
        mutating func record(_ state: CommandState, seconds: Double) {
            outcomes[state, default: 0] += 1
            histogram.observe(seconds)
        }
    }

    /// A cumulative-on-read histogram of durations.
    package struct Histogram: Sendable {
        /// Observations per bucket (not cumulative); the last is above every bound.
        package var counts = [Int](repeating: 0, count: CommandMetrics.bucketBounds.count + 1)
        package var sum: Double = 0
        package var count = 0

        /// A histogram with nothing observed.
        package init() {}

        mutating func observe(_ seconds: Double) {
            let index = CommandMetrics.bucketBounds.firstIndex { seconds <= $0 } ?? CommandMetrics.bucketBounds.count
            counts[index] += 1
            sum += seconds
            count += 1
        }
    }

    /// One second of the live chart.
    package struct Second: Sendable {
        package var time: Int64
        package var outcomes: [CommandState: Int] = [:]
    }

    /// A command that ended recently, for the live feed.
    package struct Ended: Sendable {
        package var id: UUID
        package var command: String
        package var state: CommandState
        package var seconds: Double
        package var traceparent: String?
        /// When it ended, in seconds since 1970.
        package var endedAt: Double
    }

    private struct State {
        var names: [String: NameCounts] = [:]
        var history: [Second] = []
        var recent = BoundedRing<Ended>(capacity: CommandMetrics.recentEndings)
        var journalCommits = Histogram()
        var journalWrites = 0
        var journalSyncs = 0
        /// Every ending counted, so a reader of `recent` knows what it missed.
        var endedTotal = 0
    }
    private let state = Mutex(State())
    /// Accepted less ended: counted on the dispatch path without the lock.
    private let running = Atomic<Int>(0)

    /// Metrics with nothing counted yet.
    package init() {}

    package func commandAccepted(_ envelope: CommandEnvelope) {
        running.add(1, ordering: .relaxed)
    }

    package func commandFinished(_ envelope: CommandEnvelope, state ended: CommandState, error: CommandBusError?, after duration: Duration) {
        running.subtract(1, ordering: .relaxed)
        let now = Date().timeIntervalSince1970
        let second = Int64(now)
        let seconds = duration.seconds
        state.withLock { state in
            let name = CountedName.of(envelope.commandName, error: error, isCounted: { state.names[$0] != nil }, names: state.names.count)
            // One lookup, in place.
            state.names[name, default: NameCounts()].record(ended, seconds: seconds)
            if state.history.last?.time != second {
                state.history.append(Second(time: second))
                if state.history.count > Self.historySeconds { state.history.removeFirst(state.history.count - Self.historySeconds) }
            }
            state.history[state.history.count - 1].outcomes[ended, default: 0] += 1
            state.recent.append(Ended(id: envelope.id, command: envelope.commandName, state: ended, seconds: seconds, traceparent: envelope.metadata["traceparent"], endedAt: now))
            state.endedTotal += 1
        }
    }

    /// Records one journal commit: how long it took and how many writes it held.
    package func journalCommitted(_ duration: Duration, writes: Int, synced: Bool) {
        state.withLock { state in
            state.journalCommits.observe(duration.seconds)
            state.journalWrites += writes
            if synced { state.journalSyncs += 1 }
        }
    }

    /// Commands accepted and not ended.
    package var inFlight: Int { max(0, running.load(ordering: .relaxed)) }

    /// Counts per command name, sorted by name.
    package var names: [(name: String, counts: NameCounts)] {
        state.withLock { $0.names }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// The journal's commit histogram and the writes it committed.
    package var journal: (commits: Histogram, writes: Int, syncs: Int) {
        state.withLock { ($0.journalCommits, $0.journalWrites, $0.journalSyncs) }
    }

    /// The last `seconds` seconds of outcomes, oldest first, with empty seconds filled in, ending at `now`.
    package func history(seconds: Int, now: Int64 = Int64(Date().timeIntervalSince1970)) -> [Second] {
        let kept = state.withLock { $0.history }
        var byTime: [Int64: Second] = [:]
        for second in kept { byTime[second.time] = second }
        return (0..<seconds).map { offset in
            let time = now - Int64(seconds - 1 - offset)
            return byTime[time] ?? Second(time: time)
        }
    }

    /// The last `count` commands that ended, newest last: what a page opened now shows as just ended.
    package func lastEnded(_ count: Int) -> [Ended] {
        state.withLock { Array($0.recent.suffix(count)) }
    }

    /// Commands that ended since `after` (an index into the recent list, as returned), newest last.
    package func ended(since after: Int) -> (ended: [Ended], next: Int) {
        state.withLock { state in
            let missing = min(max(0, state.endedTotal - after), state.recent.count)
            return (state.recent.suffix(missing), state.endedTotal)
        }
    }
}
