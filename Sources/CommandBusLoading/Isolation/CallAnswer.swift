import Synchronization

/// The answer to one call into a worker: delivered once by the host's reader thread, taken by
/// the task that made the call.
///
/// The caller first keeps checking for a few microseconds (``spin(for:)``) and only then
/// suspends (``wait()``). On a virtual machine, waking a parked thread costs tens of
/// microseconds, more than the whole crossing when the plugin is quick; an answer that comes
/// within the spin is taken without any thread being woken.
package final class CallAnswer: Sendable {
    package typealias Value = (status: Int32, body: [UInt8])

    private let ready = Atomic<Bool>(false)
    private let state = Mutex<(value: Value?, waiter: UnsafeContinuation<Value, Never>?)>((nil, nil))

    package init() {}

    /// Records the answer and resumes the caller if it is suspended; a second answer is ignored.
    package func deliver(_ status: Int32, _ body: [UInt8]) {
        let waiter = state.withLock { state -> UnsafeContinuation<Value, Never>? in
            guard state.value == nil else { return nil }
            state.value = (status, body)
            defer { state.waiter = nil }
            return state.waiter
        }
        ready.store(true, ordering: .releasing)
        waiter?.resume(returning: (status, body))
    }

    /// The answer, if it arrives within `duration`; `nil` otherwise.
    package func spin(for duration: Duration) -> Value? {
        let end = ContinuousClock.now + duration
        var checks = 0
        while !ready.load(ordering: .acquiring) {
            checks += 1
            // Reading the clock costs more than the flag: look at it every 64 checks.
            if checks & 63 == 0 && ContinuousClock.now >= end { return nil }
        }
        return state.withLock { $0.value }
    }

    /// Suspends until the answer arrives.
    package func wait() async -> Value {
        await withUnsafeContinuation { continuation in
            let early = state.withLock { state -> Value? in
                if let value = state.value { return value }
                state.waiter = continuation
                return nil
            }
            if let early { continuation.resume(returning: early) }
        }
    }
}
