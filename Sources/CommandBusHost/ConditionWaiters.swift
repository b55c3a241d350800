/// Tasks waiting for a condition that their owner's state decides (no command in flight, a
/// table empty), kept in that state and touched only under its lock. The owner resumes them,
/// out of the lock, when the condition comes to hold; a drain whose deadline passes gives them
/// up, now and from then on, so a task that comes to wait after that (one that was between two
/// waits when the deadline passed) returns at once instead of waiting for ever.
package struct ConditionWaiters {
    private var waiting: [UnsafeContinuation<Void, Never>] = []
    private var givenUp = false

    /// No task waiting, none given up.
    package init() {}

    /// Keeps `continuation` until the condition holds, unless it holds now (`holdsNow`) or the
    /// waiters were given up: then hands it back, for the caller to resume out of the lock.
    package mutating func wait(_ continuation: UnsafeContinuation<Void, Never>, holdsNow: Bool) -> UnsafeContinuation<Void, Never>? {
        guard !holdsNow, !givenUp else { return continuation }
        waiting.append(continuation)
        return nil
    }

    /// The condition holds: every task waiting, for the caller to resume out of the lock.
    package mutating func takeAll() -> [UnsafeContinuation<Void, Never>] {
        guard !waiting.isEmpty else { return [] }
        defer { waiting = [] }
        return waiting
    }

    /// Stops waiting for the condition, now and from now on: every task waiting, to resume.
    package mutating func giveUp() -> [UnsafeContinuation<Void, Never>] {
        givenUp = true
        return takeAll()
    }
}
