import Synchronization

/// The answer to one call into a worker: delivered once by the host's reader thread, taken by
/// the task that made the call.
///
/// The caller reads the worker's frames itself for a moment, looking at ``value``, and only
/// then suspends (``wait()``); see ``IsolatedPlugin/answer(to:from:)``.
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

    /// The answer, if it has arrived.
    package var value: Value? {
        guard ready.load(ordering: .acquiring) else { return nil }
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
