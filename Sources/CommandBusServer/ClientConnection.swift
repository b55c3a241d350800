import CommandBusSupport
import Dispatch
import Synchronization
import Glibc

/// One client of the server. A line is written at once by the thread that has it when nothing is
/// queued and the socket takes it whole (no thread is woken: on a virtual machine a wake costs
/// tens of microseconds); otherwise it joins a queue that a thread of the connection's own writes,
/// so a client that never reads holds up nobody else. Past a limit the client is dropped.
package final class ClientConnection: Sendable {
    package let descriptor: Int32
    /// The most bytes waiting for a client before it is dropped.
    package static let maxQueuedBytes = 64 << 20
    /// The queue; `writing` while the writer thread has lines in hand, so later lines wait behind them.
    private let outgoing = Mutex<(lines: [[UInt8]], bytes: Int, closed: Bool, writing: Bool)>(([], 0, false, false))
    private let wake = DispatchSemaphore(value: 0)

    package init(descriptor: Int32) {
        self.descriptor = descriptor
        DetachedThread.start { [self] in self.writeLoop() }
    }

    /// Queues one JSON line for the client.
    package func send(_ value: JSONValue) {
        let line = Array((value.text + "\n").utf8)
        enum Next { case done, wakeWriter, drop }
        let next = outgoing.withLock { state -> Next in
            guard !state.closed else { return .done }
            if state.lines.isEmpty && !state.writing {
                // Nothing ahead of it: try the socket now, without blocking.
                let written = line.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                if written == line.count { return .done }
                if written < 0 && errno != EAGAIN && errno != EINTR { return .drop }
                let rest = Array(line[max(0, written)...])
                state.lines.append(rest)
                state.bytes += rest.count
                return .wakeWriter
            }
            state.lines.append(line)
            state.bytes += line.count
            return state.bytes > Self.maxQueuedBytes ? .drop : .wakeWriter
        }
        switch next {
        case .done: break
        case .wakeWriter: wake.signal()
        case .drop: close()
        }
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
                defer { state.lines = []; state.bytes = 0; state.writing = !state.closed }
                return (state.lines, state.closed)
            }
            if closed { break }
            for line in lines where !sendAll(descriptor, line) {
                close()
                break
            }
            // Lines queued meanwhile are still ahead of any new one: take them before writing inline again.
            let more = outgoing.withLock { state -> Bool in
                if state.lines.isEmpty { state.writing = false }
                return !state.lines.isEmpty
            }
            if more { wake.signal() }
        }
        Glibc.close(descriptor)
    }
}
