import CommandBus
import CommandBusSupport
import Dispatch
import Synchronization
import Glibc

/// One client of the server. A line is written at once by the thread that has it when nothing is
/// queued and the socket takes it whole (no thread is woken: on a virtual machine a wake costs
/// tens of microseconds); otherwise it joins a queue that a thread of the connection's own writes,
/// so a client that never reads holds up nobody else. Past a limit the client is dropped.
///
/// While the request loop handles a burst of this client's requests it holds the connection
/// (``hold()``): lines gather and go out in one `send` when it lets go (``release()``), not one
/// system call per answer.
package final class ClientConnection: Sendable {
    private let descriptor: Int32
    /// The most bytes waiting for a client before it is dropped.
    package static let maxQueuedBytes = 64 << 20
    private struct Outgoing {
        var lines: [[UInt8]] = []
        var bytes = 0
        var closed = false
        /// The writer thread has lines in hand, so later lines wait behind them.
        var writing = false
        /// Lines gathered while the connection is held, in order.
        var held: [UInt8]?
    }
    private let outgoing = Mutex(Outgoing())
    private let wake = DispatchSemaphore(value: 0)

    package init(descriptor: Int32) {
        self.descriptor = descriptor
        DetachedThread.start { [self] in self.writeLoop() }
    }

    /// Queues one JSON line for the client.
    package func send(_ value: JSONValue) {
        send(line: ReplyLine.line(value))
    }

    /// Queues one line for the client, its newline included.
    package func send(line: [UInt8]) {
        let next = outgoing.withLock { state -> Next in
            guard state.held == nil else {
                state.held!.append(contentsOf: line)
                return .done
            }
            return write(line, &state)
        }
        carry(out: next)
    }

    /// Queues one line for the connection's writer thread, which takes every line queued by the
    /// time it wakes and writes them in one `send`: for lines that come in bursts from another
    /// thread (the acknowledgements of the posts a journal commit wrote ahead), one system call
    /// and one wake for many, where ``send(line:)`` would make a call each. While the connection
    /// is held, the line joins those gathered.
    package func sendSoon(line: [UInt8]) {
        let next = outgoing.withLock { state -> Next in
            guard !state.closed else { return .done }
            if state.held != nil {
                state.held!.append(contentsOf: line)
                return .done
            }
            let writerIdle = state.lines.isEmpty && !state.writing
            let queued = queue(line, &state)
            return writerIdle || queued == .drop ? queued : .done
        }
        carry(out: next)
    }

    /// Gathers the lines sent from now until ``release()`` into one write.
    package func hold() {
        outgoing.withLock { state in
            if state.held == nil { state.held = [] }
        }
    }

    /// Writes the lines gathered since ``hold()``, and lets later ones go out as they come.
    package func release() {
        let next = outgoing.withLock { state -> Next in
            guard let gathered = state.held else { return .done }
            state.held = nil
            return gathered.isEmpty ? .done : write(gathered, &state)
        }
        carry(out: next)
    }

    private enum Next { case done, wakeWriter, drop }

    /// Writes whole lines, under the lock so that lines leave in the order they were sent: at
    /// once when nothing is queued and the socket takes them, else queued for the writer thread.
    private func write(_ line: [UInt8], _ state: inout Outgoing) -> Next {
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
        return queue(line, &state)
    }

    /// Queues `line` for the writer thread: the client is dropped once too much waits for it.
    private func queue(_ line: [UInt8], _ state: inout Outgoing) -> Next {
        state.lines.append(line)
        state.bytes += line.count
        return state.bytes > Self.maxQueuedBytes ? .drop : .wakeWriter
    }

    private func carry(out next: Next) {
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
            defer { state.closed = true; state.lines = []; state.held = nil }
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
            // All in one call: a burst of acknowledgements queued together leaves together.
            let bytes = lines.count == 1 ? lines[0] : Array(lines.joined())
            if !bytes.isEmpty && !sendAll(descriptor, bytes) { close() }
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
