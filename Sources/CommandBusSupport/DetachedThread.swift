import Glibc

/// Runs a closure on a thread of its own: for blocking reads that must not hold a cooperative thread.
package enum DetachedThread {
    private final class Box {
        package let body: () -> Void
        package init(_ body: @escaping () -> Void) { self.body = body }
    }

    package static func start(_ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        if created == 0 { pthread_detach(thread) } else { Unmanaged<Box>.fromOpaque(box).release() }
    }

    /// Runs blocking work (dlopen, a child process, file I/O) on a thread of its own and returns
    /// its value, so no thread of the small cooperative pool waits on it.
    package static func value<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            start { continuation.resume(returning: body()) }
        }
    }
}
