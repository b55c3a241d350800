import Synchronization

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

extension Mutex {
    /// Returns once the condition the `waiters` kept in this lock's state stand for holds: at
    /// once if `holdsNow` says it holds (read under the lock), or once the owner resumes them
    /// (``ConditionWaiters/takeAll()``) or gives them up (``ConditionWaiters/giveUp()``).
    package func wait(on waiters: WritableKeyPath<Value, ConditionWaiters> & Sendable, unlessNow holdsNow: @Sendable (Value) -> Bool) async {
        await withUnsafeContinuation { continuation in
            withLock { state in state[keyPath: waiters].wait(continuation, holdsNow: holdsNow(state)) }?.resume()
        }
    }
}
