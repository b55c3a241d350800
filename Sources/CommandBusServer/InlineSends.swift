import Synchronization

/// Which `send`s the request loop runs itself (``LoopExecutor``), and which it hands to the bus's
/// runners on the cooperative pool.
///
/// A send runs on the loop when nothing else waits to run there: a lone client gets the short
/// path, and a burst of sends (pipelined, or from many clients at once) goes mostly to the
/// runners, where both cores take them. A name whose send held on to the loop, taking longer
/// than the takeover limit from start to end, sends its next ones to the runners for
/// ``probation``: a handler that blocks costs the other clients a takeover once, not every time.
final class InlineSends: Sendable {
    /// How long a name that held on to the loop runs on the runners before it is tried again.
    static let probation: Duration = .seconds(60)
    /// The executor the admitted sends prefer.
    let executor: LoopExecutor
    private let slowUntil = Mutex<[String: ContinuousClock.Instant]>([:])

    /// Admits sends to `executor`.
    init(executor: LoopExecutor) {
        self.executor = executor
    }

    /// Whether a send of `name` should run on the loop now.
    func admits(_ name: String, now: ContinuousClock.Instant = .now) -> Bool {
        guard executor.queuedCount == 0 else { return false }
        return slowUntil.withLock { slow in
            guard let until = slow[name] else { return true }
            if now < until { return false }
            slow[name] = nil
            return true
        }
    }

    /// A send of `name` that ran on the loop ended, `elapsed` after it was posted.
    func finished(_ name: String, after elapsed: Duration, now: ContinuousClock.Instant = .now) {
        guard elapsed >= executor.takeoverAfter else { return }
        slowUntil.withLock { $0[name] = now + Self.probation }
    }
}
