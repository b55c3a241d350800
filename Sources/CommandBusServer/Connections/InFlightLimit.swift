import CommandBus
import Synchronization

/// The most commands a server holds at once (`cmdbus serve --max-in-flight`): once that many are
/// accepted and not ended, the request loop reads no further request of a client that sent or
/// posted one, until a quarter of them have ended.
///
/// A `post` is answered once it is accepted, so the per-client limit on unanswered requests
/// (``ClientConnection/maxUnanswered``) never held a client that posts: posting faster than
/// the handlers ran (a slow service, isolated workers) kept every command waiting in memory,
/// 5 KB each with `--isolate`. Four clients posting 100,000 each took a server to 767 MB and
/// growing. Now their requests wait in the socket, as a client's over its own limit do, and
/// their writes block: the server's memory stays bounded and nothing is refused or lost.
///
/// It counts every command the bus accepts, subcommands and recovered ones too, for they take
/// memory alike; it only ever holds back requests from clients, never a handler's subcommand.
package final class InFlightLimit: CommandObserver {
    /// The default bound.
    package static let defaultMaximum = 16_384
    /// Commands held at once before reading stops.
    package let maximum: Int
    /// Reading starts again once this few are in flight.
    package let resumeAt: Int
    private let count = Atomic<Int>(0)
    /// Whoever waits for room: each is called once, when it is made.
    private let waiting = Mutex<[@Sendable () -> Void]>([])
    private let anyWaiting = Atomic<Bool>(false)
    /// Times the bound was reached, for `status`.
    private let reached = Atomic<Int>(0)

    /// A limit of `maximum` commands (at least 1).
    package init(maximum: Int) {
        self.maximum = max(1, maximum)
        resumeAt = self.maximum - max(1, self.maximum / 4)
    }

    /// Commands accepted and not ended.
    package var inFlight: Int { count.load(ordering: .relaxed) }
    /// How many times reading stopped at the bound.
    package var timesReached: Int { reached.load(ordering: .relaxed) }

    package func commandAccepted(_ envelope: CommandEnvelope) {
        count.add(1, ordering: .sequentiallyConsistent)
    }

    package func commandFinished(_ envelope: CommandEnvelope, state: CommandState, error: CommandBusError?) {
        let now = count.subtract(1, ordering: .sequentiallyConsistent).newValue
        if now <= resumeAt, anyWaiting.load(ordering: .sequentiallyConsistent) { callWaiting() }
    }

    /// Whether ``maximum`` commands are in flight; if so, `resume` is called once no more than
    /// ``resumeAt`` are, and the caller should read no request until then.
    func isReached(resume: @escaping @Sendable () -> Void) -> Bool {
        guard count.load(ordering: .sequentiallyConsistent) >= maximum else { return false }
        waiting.withLock { waiting in
            waiting.append(resume)
            anyWaiting.store(true, ordering: .sequentiallyConsistent)
        }
        reached.add(1, ordering: .relaxed)
        // Room may have been made before the waiter was seen: then it is called now.
        if count.load(ordering: .sequentiallyConsistent) <= resumeAt { callWaiting() }
        return true
    }

    private func callWaiting() {
        let calls = waiting.withLock { waiting in
            defer {
                waiting = []
                anyWaiting.store(false, ordering: .sequentiallyConsistent)
            }
            return waiting
        }
        for call in calls { call() }
    }
}
