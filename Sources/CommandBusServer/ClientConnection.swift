import CommandBusSupport
import Dispatch
import Synchronization
import Glibc

/// One client of the server: lines go out through a queue of their own, written by a thread of
/// its own, so a client that never reads holds up nobody else; past a limit it is dropped.
package final class ClientConnection: Sendable {
    package let descriptor: Int32
    /// The most bytes waiting for a client before it is dropped.
    package static let maxQueuedBytes = 64 << 20
    private let outgoing = Mutex<(lines: [[UInt8]], bytes: Int, closed: Bool)>(([], 0, false))
    private let wake = DispatchSemaphore(value: 0)

    package init(descriptor: Int32) {
        self.descriptor = descriptor
        DetachedThread.start { [self] in self.writeLoop() }
    }

    /// Queues one JSON line for the client.
    package func send(_ value: JSONValue) {
        let line = Array((value.text + "\n").utf8)
        let overflow = outgoing.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.lines.append(line)
            state.bytes += line.count
            return state.bytes > Self.maxQueuedBytes
        }
        if overflow { close() } else { wake.signal() }
    }

    package var isClosed: Bool { outgoing.withLock { $0.closed } }

    /// Drops the connection; the client sees it closed.
    package func close() {
        let first = outgoing.withLock { state -> Bool in
            defer { state.closed = true; state.lines = [] }
            return !state.closed
        }
        if first {
            shutdown(descriptor, Int32(SHUT_RDWR))
            wake.signal()
        }
    }

    private func writeLoop() {
        while true {
            wake.wait()
            let (lines, closed) = outgoing.withLock { state -> ([[UInt8]], Bool) in
                defer { state.lines = []; state.bytes = 0 }
                return (state.lines, state.closed)
            }
            if closed { break }
            for line in lines where !sendAll(descriptor, line) {
                close()
                break
            }
        }
        Glibc.close(descriptor)
    }
}
