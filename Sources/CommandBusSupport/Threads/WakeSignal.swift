import CLinux
import Glibc

/// A pipe a thread can wait on beside its connection: another thread signals it to say
/// "there is work" or "stop".
package final class WakeSignal: Sendable {
    /// The descriptor to wait on.
    package let descriptor: Int32
    private let writer: Int32

    package init() {
        var ends: [Int32] = [-1, -1]
        // Close-on-exec from the start: a worker or probe another thread spawns at this moment
        // must not inherit either end.
        _ = pipe2(&ends, O_CLOEXEC | O_NONBLOCK)
        descriptor = ends[0]
        writer = ends[1]
    }

    deinit {
        close(descriptor)
        close(writer)
    }

    /// Wakes the waiter (a full pipe already says so).
    package func signal() {
        var one: UInt8 = 1
        _ = write(writer, &one, 1)
    }

    /// Clears pending signals.
    package func clear() {
        var buffer = [UInt8](repeating: 0, count: 256)
        while read(descriptor, &buffer, buffer.count) > 0 {}
    }

    /// Waits until signalled, or `timeout` passes.
    package func wait(upTo timeout: Duration) {
        var descriptor = pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)
        _ = poll(&descriptor, 1, Int32(clamping: timeout.milliseconds))
        clear()
    }
}

extension Duration {
    /// Whole milliseconds.
    package var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
