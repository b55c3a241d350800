import Synchronization

// Shared with CommandBusHostTests through a symlink (Support/Gate.swift): a test target
// cannot import another.

/// Holds whoever waits, deaf to cancellation, until opened: a handler that ignores
/// cancellation without holding a thread. (A handler that blocks its thread instead, with
/// `usleep`, can take the last of the two cooperative threads a small machine has, and with
/// another test blocking the other one, the whole run stops.)
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
