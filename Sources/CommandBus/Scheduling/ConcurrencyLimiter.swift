import Synchronization

/// An async counting semaphore: at most `limit` holders at once, waiters served first come, first served.
///
/// Acquiring under the limit takes a lock and returns without suspending.
/// A waiting task that is cancelled leaves the queue and throws `CancellationError`.
final class ConcurrencyLimiter: Sendable {
    private struct Waiter {
        let id: Int
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var inUse = 0
        var nextID = 0
        var waiters: [Waiter] = []
        var head = 0
        var cancelledBeforeWaiting: Set<Int> = []
    }

    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        precondition(limit > 0, "a concurrency limit must be at least 1")
        self.limit = limit
    }

    /// How many holders there are now.
    var inUse: Int { state.withLock { $0.inUse } }

    func acquire() async throws {
        let ticket: Int? = state.withLock { state in
            if state.inUse < limit {
                state.inUse += 1
                return nil
            }
            state.nextID += 1
            return state.nextID
        }
        guard let id = ticket else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = state.withLock { state -> Bool in
                    if state.cancelledBeforeWaiting.remove(id) != nil { return true }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                if let index = state.waiters[state.head...].firstIndex(where: { $0.id == id }) {
                    return state.waiters.remove(at: index)
                }
                state.cancelledBeforeWaiting.insert(id)
                return nil
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Gives a slot back, handing it straight to the longest waiter if there is one.
    func release() {
        let next = state.withLock { state -> Waiter? in
            guard state.head < state.waiters.count else {
                state.inUse -= 1
                return nil
            }
            let waiter = state.waiters[state.head]
            state.head += 1
            if state.head > 64, state.head * 2 > state.waiters.count {
                state.waiters.removeFirst(state.head)
                state.head = 0
            }
            return waiter
        }
        next?.continuation.resume()
    }
}
