import CLinux
import Glibc

/// Runs a closure on a thread of its own: for blocking reads that must not hold a cooperative thread.
package enum DetachedThread {
    private final class Box {
        let name: String?
        let body: () -> Void
        init(name: String?, _ body: @escaping () -> Void) {
            self.name = name.map(DetachedThread.threadName)
            self.body = body
        }

        /// Names the thread it runs on, then runs the body.
        func run() {
            if let name { _ = pthread_setname_np(pthread_self(), name) }
            body()
        }
    }

    /// Starts `body` on a new thread, named `name` where the system shows threads (`top -H`,
    /// `ps -L`, `perf`, a debugger; at most 15 bytes kept): otherwise it takes the name of the
    /// thread that started it, often one of Swift's pool, and every thread of a host looks alike.
    package static func start(named name: String? = nil, _ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Box(name: name, body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { raw in
            Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, box)
        if created == 0 { pthread_detach(thread) } else { Unmanaged<Box>.fromOpaque(box).release() }
    }

    /// `name`'s first characters that fit a thread's name: 15 bytes (and the terminating zero).
    package static func threadName(_ name: String) -> String {
        var kept = ""
        for character in name {
            guard kept.utf8.count + character.utf8.count <= 15 else { break }
            kept.append(character)
        }
        return kept
    }

    /// Runs blocking work (dlopen, a child process, file I/O) on a thread of its own and returns
    /// its value, so no thread of the small cooperative pool waits on it.
    package static func value<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            start { continuation.resume(returning: body()) }
        }
    }
}
