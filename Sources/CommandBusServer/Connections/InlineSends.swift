import Synchronization

/// Which `send`s the request loop runs itself (``LoopExecutor``), and which it hands to the bus's
/// runners on the cooperative pool.
///
/// A send runs on the loop when nothing else waits to run there: a lone client gets the short
/// path, and a burst of sends (pipelined, or from many clients at once) goes mostly to the
/// runners, where both cores take them.
///
/// A name whose sends held on to the loop twice within ``probation`` (each time, the loop was
/// taken over while the send ran, and the send took longer than the takeover limit) sends its
/// next ones to the runners for ``probation``: a handler that blocks costs the other clients two
/// takeovers, not one per send (and one that never returns, a thread each time it is tried, up to
/// the executor's ``LoopExecutor/maxStuckDrivers``). Once is not enough: on a loaded machine the
/// loop's thread can be descheduled for 10 ms in the middle of a quick command, and one such
/// moment sent a benchmark's every later `greet` to the runners. A send that was merely slow,
/// waiting for a journal's sync, while no takeover happened, is not held against its name.
final class InlineSends: Sendable {
    /// How long a name that held on to the loop twice runs on the runners before it is tried
    /// again; also how long a first time is remembered.
    static let probation: Duration = .seconds(60)
    /// The executor the admitted sends prefer.
    let executor: LoopExecutor
    private let slowUntil = Mutex<[String: ContinuousClock.Instant]>([:])
    /// Names whose send held on to the loop once, and when.
    private let firstStrike = Mutex<[String: ContinuousClock.Instant]>([:])
    private let ranOnLoop = Atomic<Int>(0)
    private let ranOnRunners = Atomic<Int>(0)

    /// Admits sends to `executor`.
    init(executor: LoopExecutor) {
        self.executor = executor
    }

    /// Whether a send of `name` should run on the loop now.
    func admits(_ name: String, now: ContinuousClock.Instant = .now) -> Bool {
        guard executor.takesWork else { return false }
        return slowUntil.withLock { slow in
            guard let until = slow[name] else { return true }
            if now < until { return false }
            slow[name] = nil
            return true
        }
    }

    /// What a send that may run on the loop needs to know when it ends: when it began, and the
    /// takeovers counted then.
    struct Start: Sendable {
        let at: ContinuousClock.Instant
        let takeovers: Int
    }

    /// Counts a socket `send` by where it runs, for the metrics.
    func count(onLoop: Bool) {
        if onLoop { ranOnLoop.add(1, ordering: .relaxed) } else { ranOnRunners.add(1, ordering: .relaxed) }
    }

    /// Socket `send`s so far, by where they ran, and the loop's takeovers.
    var counts: (sendsOnLoop: Int, sendsOnRunners: Int, takeovers: Int) {
        (ranOnLoop.load(ordering: .relaxed), ranOnRunners.load(ordering: .relaxed), executor.takeovers)
    }

    /// Marks the start of a send admitted to the loop.
    func start(now: ContinuousClock.Instant = .now) -> Start {
        Start(at: now, takeovers: executor.takeovers)
    }

    /// A send of `name` that ran on the loop, begun at `start`, ended.
    /// - Returns: how long it took, if it held on to the loop for the second time within
    ///   ``probation`` and its name is on probation from now.
    func finished(_ name: String, _ start: Start, now: ContinuousClock.Instant = .now) -> Duration? {
        let elapsed = now - start.at
        guard elapsed >= executor.takeoverAfter, executor.takeovers > start.takeovers else { return nil }
        let again = firstStrike.withLock { strikes -> Bool in
            if let first = strikes[name], now - first < Self.probation {
                strikes[name] = nil
                return true
            }
            strikes[name] = now
            return false
        }
        guard again else { return nil }
        slowUntil.withLock { $0[name] = now + Self.probation }
        return elapsed
    }
}
