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
///
/// It also counts the client's requests not answered yet, so the loop can stop reading a client
/// that asks faster than its commands end (``isSaturated(resume:)``): its requests then wait in
/// the socket, and its writes block, rather than the server holding every one of them in memory.
///
/// A client may shut its writing side and go on reading (`socat` does at the end of its input):
/// the connection then closes once every request it made is answered and it follows no events
/// (``readingEnded()``).
package final class ClientConnection: Sendable {
    private let descriptor: Int32
    /// The most bytes waiting for a client before it is dropped.
    package static let maxQueuedBytes = 64 << 20
    /// The most requests of one client the server holds unanswered before it stops reading it.
    package static let maxUnanswered = 4_096
    /// Reading resumes once this few are unanswered.
    package static let resumeAtUnanswered = maxUnanswered / 2
    private struct Backlog {
        var unanswered = 0
        /// Called once enough are answered, while the loop does not read the client.
        var resume: (@Sendable () -> Void)?
        /// The client shut its writing side: no request comes after those counted.
        var readingEnded = false
        /// `subscribe` streams: the client asked for events without end.
        var subscriptions = 0
        /// Whether the connection has nothing left to say.
        var isSpent: Bool { readingEnded && unanswered == 0 && subscriptions == 0 }
    }
    private let backlog = Mutex(Backlog())
    private struct Outgoing {
        var lines: [[UInt8]] = []
        var bytes = 0
        var closed = false
        /// The writer thread has lines in hand, so later lines wait behind them.
        var writing = false
        /// Lines gathered while the connection is held, in order.
        var held: [UInt8]?
        /// The writer closes the connection once the lines queued are written.
        var finishing = false
    }
    private let outgoing = Mutex(Outgoing())
    /// Commands this client sent or posted, for the loop to tell a client that adds work from
    /// one that only asks (``InFlightLimit``).
    private let started = Atomic<Int>(0)
    private let wake = DispatchSemaphore(value: 0)
    /// What runs when the connection closes (a `subscribe` stream's end); `nil` once it has.
    private let closeActions = Mutex<[Callback<Void>]?>([])
    /// Told once if the client is dropped for not reading (more than ``maxQueuedBytes`` waited),
    /// with the process at the socket's other end, where the socket names it.
    private let onOverflow: (@Sendable (PeerProcess?) -> Void)?

    /// - Parameter onOverflow: Told once if the client is dropped for not reading.
    package init(descriptor: Int32, onOverflow: (@Sendable (PeerProcess?) -> Void)? = nil) {
        self.descriptor = descriptor
        self.onOverflow = onOverflow
        DetachedThread.start(named: "client-writer") { [self] in self.writeLoop() }
    }

    /// Counts a request that will be answered (by ``send(_:)``, ``send(line:)`` or ``sendSoon(line:)``).
    package func expectAnswer() {
        backlog.withLock { $0.unanswered += 1 }
    }

    /// Counts a command the client sent or posted.
    package func startedCommand() {
        started.add(1, ordering: .relaxed)
    }

    /// How many commands the client has sent or posted.
    package var commandsStarted: Int { started.load(ordering: .relaxed) }

    /// Counts a `subscribe` stream: its events have no last one, so a client that shut its
    /// writing side keeps its connection until it closes it.
    package func expectEvents() {
        backlog.withLock { $0.subscriptions += 1 }
    }

    /// The client shut its writing side (the loop read its end): the connection closes once
    /// every request is answered and the answers are written.
    package func readingEnded() {
        let spent = backlog.withLock { backlog in
            backlog.readingEnded = true
            return backlog.isSpent
        }
        if spent { finish() }
    }

    /// Whether the client has ``maxUnanswered`` requests unanswered; if so, `resume` is called
    /// once ``resumeAtUnanswered`` are, and the loop should not read the client until then.
    package func isSaturated(resume: @escaping @Sendable () -> Void) -> Bool {
        backlog.withLock { backlog in
            guard backlog.unanswered >= Self.maxUnanswered else { return false }
            backlog.resume = resume
            return true
        }
    }

    /// Counts off an answer, after its line is queued (so a connection that closes once the
    /// last is answered writes it first).
    private func answered() {
        let (resume, spent) = backlog.withLock { backlog -> ((@Sendable () -> Void)?, Bool) in
            backlog.unanswered -= 1
            guard backlog.unanswered <= Self.resumeAtUnanswered, let resume = backlog.resume else { return (nil, backlog.isSpent) }
            backlog.resume = nil
            return (resume, backlog.isSpent)
        }
        resume?()
        if spent { finish() }
    }

    /// Queues one JSON line answering a request.
    package func send(_ value: JSONValue) {
        send(line: ReplyLine.line(value))
    }

    /// Queues one event line (a command's progress): it answers no request.
    package func sendEvent(_ value: JSONValue) {
        queueLine(ReplyLine.line(value))
    }

    /// Queues one line answering a request, its newline included.
    package func send(line: [UInt8]) {
        queueLine(line)
        answered()
    }

    private func queueLine(_ line: [UInt8]) {
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
        defer { answered() }
        let next = outgoing.withLock { state -> Next in
            guard !state.closed else { return .done }
            if state.held != nil {
                state.held!.append(contentsOf: line)
                return .done
            }
            let writerIdle = state.lines.isEmpty && !state.writing
            let queued = queue(line, &state)
            return writerIdle || queued == .overflow ? queued : .done
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

    /// What a write leaves to do once the lock is let go: nothing, wake the writer thread, or
    /// drop the client, which is gone (`drop`) or reads too little (`overflow`).
    private enum Next { case done, wakeWriter, drop, overflow }

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
        return state.bytes > Self.maxQueuedBytes ? .overflow : .wakeWriter
    }

    private func carry(out next: Next) {
        switch next {
        case .done: break
        case .wakeWriter: wake.signal()
        case .drop: close()
        case .overflow:
            // Named before the close, while the socket still knows its other end.
            let peer = PeerProcess(ofSocket: descriptor)
            if closeFirst() { onOverflow?(peer) }
        }
    }

    package var isClosed: Bool { outgoing.withLock { $0.closed } }

    /// Runs `action` when the connection closes, however it does (at once if it has): for work
    /// that lasts as long as the client, such as a `subscribe` stream, which otherwise waited
    /// for an event of its command after the client had gone, for ever if none came.
    package func onClose(_ action: @escaping @Sendable () -> Void) {
        let closed = closeActions.withLock { actions -> Bool in
            guard actions != nil else { return true }
            actions!.append(Callback(action))
            return false
        }
        if closed { action() }
    }

    private func runCloseActions() {
        for action in closeActions.withLock({ actions in defer { actions = nil }; return actions ?? [] }) { action() }
    }

    /// Drops the connection; the client sees it closed.
    package func close() {
        closeFirst()
    }

    /// Drops the connection; `true` if this call did, `false` if it was closed already.
    @discardableResult
    private func closeFirst() -> Bool {
        let first = outgoing.withLock { state -> Bool in
            defer { state.closed = true; state.lines = []; state.held = nil }
            return !state.closed
        }
        if first {
            shutdown(descriptor, Int32(SHUT_RDWR))
            wake.signal()
            runCloseActions()
        }
        return first
    }

    /// Closes the connection once the lines queued so far are written.
    private func finish() {
        let first = outgoing.withLock { state -> Bool in
            defer { state.finishing = true }
            return !state.closed && !state.finishing
        }
        if first { wake.signal() }
    }

    private func writeLoop() {
        while true {
            wake.wait()
            let (lines, closed) = outgoing.withLock { state -> ([[UInt8]], Bool) in
                if state.finishing && state.lines.isEmpty && state.held == nil { state.closed = true }
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
                return !state.lines.isEmpty || state.finishing
            }
            if more { wake.signal() }
        }
        // The request loop reads through a descriptor of its own: the shutdown, not the close,
        // is what the client (and the loop) see end.
        shutdown(descriptor, Int32(SHUT_RDWR))
        Glibc.close(descriptor)
        runCloseActions()
    }
}
