import CommandBusSupport
import CommandBus
import CommandBusHost
import CEpoll
import Glibc
import Synchronization

/// The one thread that accepts every client and reads every request: one `epoll` set for the
/// listening socket and all connections, instead of a thread per connection. Between bursts it
/// runs the quick `send`s it was given (``LoopExecutor``), so they wake no other thread.
///
/// Ten busy connections used to mean ten reader threads on two cores, taking the same locks
/// (the ticket table, the statistics, the run queue) and spinning for them. Here one thread
/// reads them in turn, a burst at a time, so a flooding client cannot starve the others.
/// Answers do not come back through the reading: whoever ends a command writes its reply on the
/// client's ``ClientConnection``.
///
/// A client with ``ClientConnection/maxUnanswered`` requests unanswered is taken out of the set
/// until half of them are answered: its further requests wait in the socket (and then its writes
/// block), so one client that asks without reading cannot fill the server's memory with commands.
/// Once the server holds its most commands (``InFlightLimit``), a client whose request added one
/// is taken out the same way, its next lines kept unread, until room is made: so clients that
/// post faster than the commands run cannot either.
///
/// Its state is touched by the thread driving it only, and a takeover hands it to the next
/// thread under the executor's lock, while the previous one is inside a job; hence
/// `@unchecked Sendable`.
///
/// The loop reads through its own duplicate of each client's descriptor, and only it closes
/// that duplicate, after taking it out of the set: the connection's writer closes the other
/// one when it is done. So a descriptor number is never used by one side after the other
/// closed it, however a connection ends.
final class RequestLoop: @unchecked Sendable {
    /// One client, as the loop sees it.
    private final class Client {
        let connection: ClientConnection
        let descriptor: Int32
        var lines: LineSplitter
        /// Tickets of `send`s asked to be cancelled if this client goes away.
        let owned = TicketTable()
        /// The client shut its writing side; it still reads its answers.
        var readingEnded = false

        init(connection: ClientConnection, descriptor: Int32, limit: Int) {
            self.connection = connection
            self.descriptor = descriptor
            lines = LineSplitter(limit: limit)
        }
    }

    private let epoll: Int32
    private let listener: Int32
    private let limit: Int
    private let handle: (LineSplitter.Line, ClientConnection, TicketTable) -> Void
    private let inFlight: InFlightLimit?
    private var clients: [UInt64: Client] = [:]
    private var nextID: UInt64 = 1
    private static let listenerID: UInt64 = 0
    private var chunk = [UInt8](repeating: 0, count: 65_536)
    private let executor: LoopExecutor
    /// The executor's wake descriptor's id in the `epoll` set.
    private static let wakeID = UInt64.max
    /// For refusing connections while the process is out of descriptors.
    private var reserve = DescriptorReserve()
    /// The listener is out of the set until a client leaves: out of descriptors, even the reserve's.
    private var listenerPaused = false
    /// Told the number of connections refused for want of descriptors, at most every 10 s.
    private let onRefused: (Int) -> Void
    private let onOverflow: @Sendable (PeerProcess?) -> Void
    private var refusedUntold = 0
    private var lastToldOfRefusals: ContinuousClock.Instant?
    /// Clients out of the set until enough of their requests are answered.
    private var paused: Set<UInt64> = []
    /// Whether the next wait spins before it sleeps: not after a sleep that lasted more than two
    /// spins (a lone client's next request comes far later, and the spin would only burn the
    /// core: 363 µs of CPU a lone send, where 224 without); again once work comes within two
    /// spins of a sleep, or is there at once.
    private var spinning = true
    /// Paused clients whose answers caught up, for the driver to read again: added to by the
    /// threads that answer, taken by the driver.
    private let caughtUpIDs = Mutex<[UInt64]>([])

    /// What a connection refused for want of descriptors reads before it is closed.
    static let busyLine = Array((JSONValue.object([
        "id": .null, "ok": .bool(false),
        "error": .object([
            "code": .string("serverBusy"),
            "message": .string("the server has no file descriptor free for another connection; close idle connections, or raise its limit (ulimit -n, systemd's LimitNOFILE=)"),
        ]),
    ]).text + "\n").utf8)

    /// A loop for `listener`; `handle` is called on the loop's thread for each request line, and
    /// `onRefused` with how many connections were refused for want of descriptors (at most every 10 s),
    /// and `onOverflow` with the process of each client dropped for not reading its answers.
    /// `inFlight`, if given, bounds the commands the server holds (see above).
    init(
        listener: Int32, maxLineBytes: Int, executor: LoopExecutor, inFlight: InFlightLimit? = nil, onRefused: @escaping (Int) -> Void = { _ in },
        onOverflow: @escaping @Sendable (PeerProcess?) -> Void = { _ in },
        handle: @escaping (LineSplitter.Line, ClientConnection, TicketTable) -> Void
    ) {
        self.executor = executor
        self.inFlight = inFlight
        self.onRefused = onRefused
        self.onOverflow = onOverflow
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        self.listener = listener
        limit = maxLineBytes
        self.handle = handle
    }

    /// Starts serving, for the life of the process; after the listening socket is closed (a
    /// drain), only the clients already connected. The loop is driven by one thread at a time
    /// (see ``LoopExecutor``), which also runs the commands that prefer the loop's executor.
    func start() {
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)
        register(listener, id: Self.listenerID)
        register(executor.wakeDescriptor, id: Self.wakeID)
        executor.start { [self] generation in drive(as: generation) }
    }

    /// Drives the loop until a newer generation takes it over (a command held it too long).
    private func drive(as generation: UInt64) {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        while executor.runQueued(as: generation) {
            // Before waiting, not after: a client that caught up while the last burst was handled
            // woke the loop with a job, just run, and is read again nowhere else. Looked at once
            // the wait returned, it was left out of the set until something else woke the loop:
            // a lone client posting past the bound (``InFlightLimit``) waited for good.
            if !paused.isEmpty { resumeCaughtUp() }
            let count = wait(&events)
            // Only a broken epoll descriptor fails here (an interrupted wait returns no events).
            guard count >= 0 else { return }
            for event in events.prefix(Int(count)) {
                switch event.data.u64 {
                case Self.wakeID: continue
                case Self.listenerID: acceptAll(events: event.events)
                case let id: if let client = clients[id] { service(client, id: id, events: event.events) }
                }
            }
        }
    }

    /// Waits for events, asking without sleeping for a moment first while that pays
    /// (``spinning``): a client's next request often follows its answer within that, and waking
    /// a sleeping thread costs tens of microseconds on a virtual machine.
    ///
    /// A wait a signal interrupts returns 0 events: after the process is stopped and continued
    /// (`kill -STOP`, then `-CONT`; a shell's Ctrl-Z and `fg`; a tracer attaching), Linux ends a
    /// sleeping `epoll_wait` with `EINTR` though no handler ran. Returned as -1, the driver read
    /// `errno` after ``LoopExecutor/awake()`` had overwritten it (its `read` of the wake descriptor
    /// finds nothing: `EAGAIN`), took it for a broken loop and stopped serving.
    private func wait(_ events: inout [epoll_event]) -> Int32 {
        let spin = LineSocketReader.spin
        let spinUntil = ContinuousClock.now + (spinning ? spin : .zero)
        while true {
            let count = epoll_wait(epoll, &events, Int32(events.count), 0)
            if count > 0 || count < 0 && errno != EINTR {
                spinning = true
                return count
            }
            if executor.hasQueued { return 0 }
            if ContinuousClock.now >= spinUntil {
                guard executor.prepareToSleep() else { return 0 }
                let asleep = ContinuousClock.now
                let count = epoll_wait(epoll, &events, Int32(events.count), -1)
                let interrupted = count < 0 && errno == EINTR
                executor.awake()
                spinning = ContinuousClock.now - asleep < spin * 2
                return interrupted ? 0 : count
            }
        }
    }

    private func register(_ descriptor: Int32, id: UInt64) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue
        event.data.u64 = id
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, descriptor, &event)
    }

    private func acceptAll(events: UInt32) {
        while true {
            let descriptor = accept(listener, nil, nil)
            if descriptor >= 0 { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
            if descriptor < 0 {
                switch errno {
                case EINTR, ECONNABORTED:
                    continue
                case EAGAIN:
                    return
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: refuse what waits, saying why, so its clients do not hang.
                    // Once even the reserve is gone, stop watching the listener until a client
                    // leaves (it stays ready, and the wait would spin). Giving it up for good, as
                    // this once did, left the server accepting no one ever again.
                    if reserve.refuseOne(on: listener, saying: Self.busyLine) {
                        noteRefusal()
                        continue
                    }
                    if reserve.isSpent { pauseListener() }
                    return
                default:
                    // The listener was closed (a drain): stop watching it.
                    _ = epoll_ctl(epoll, EPOLL_CTL_DEL, listener, nil)
                    return
                }
            }
            let own = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
            guard own >= 0 else {
                DescriptorReserve.tell(descriptor, Self.busyLine)
                Glibc.close(descriptor)
                noteRefusal()
                continue
            }
            let id = nextID
            nextID += 1
            clients[id] = Client(connection: ClientConnection(descriptor: descriptor, onOverflow: onOverflow), descriptor: own, limit: limit)
            register(own, id: id)
        }
    }

    /// Reads one burst (at most one buffer) from a client and handles the whole lines in it.
    private func service(_ client: Client, id: UInt64, events: UInt32) {
        if client.readingEnded { return drop(client, id: id) }
        let got = chunk.withUnsafeMutableBytes { recv(client.descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if got < 0 && (errno == EAGAIN || errno == EINTR) { return }
        guard got > 0 else {
            // The end of its requests: a client that only shut its writing side (EPOLLHUP is both
            // sides) is still reading, and gets its answers.
            if got == 0 && events & EPOLLHUP.rawValue == 0 { return endReading(client, id: id) }
            return drop(client, id: id)
        }
        chunk.withUnsafeBytes { client.lines.append(UnsafeRawBufferPointer(rebasing: $0[..<got])) }
        handleLines(of: client, id: id)
    }

    /// Handles the whole lines read from a client, and takes it out of the set if it must wait:
    /// for answers (``ClientConnection/isSaturated(resume:)``), or, once a line of it added a
    /// command while the server holds its most, for room (the lines after it stay unread).
    private func handleLines(of client: Client, id: UInt64) {
        var waitsForRoom = false
        // The answers this burst makes (and any other line meanwhile) leave in one write at its end.
        client.connection.hold()
        while let line = client.lines.next() {
            let started = client.connection.commandsStarted
            handle(line, client.connection, client.owned)
            if let inFlight, client.connection.commandsStarted != started, inFlight.isReached(resume: { [self] in caughtUp(id) }) {
                waitsForRoom = true
                break
            }
        }
        client.connection.release()
        if waitsForRoom || client.connection.isSaturated(resume: { [self] in caughtUp(id) }) {
            _ = epoll_ctl(epoll, EPOLL_CTL_DEL, client.descriptor, nil)
            paused.insert(id)
        }
    }

    /// The client shut its writing side, as `socat` and `nc -N` do at the end of their input: a
    /// last line without its newline is a request too, and the connection closes once each is
    /// answered. Only a hang-up (the client closed, or the connection did) is watched for from
    /// now on; it drops the client as a disconnect does. A server that dropped the client here
    /// lost every answer not written yet: `echo '{…}' | socat - UNIX-CONNECT:…` got nothing back
    /// for any command slower than the loop's own.
    private func endReading(_ client: Client, id: UInt64) {
        client.readingEnded = true
        var event = epoll_event()
        event.data.u64 = id
        _ = epoll_ctl(epoll, EPOLL_CTL_MOD, client.descriptor, &event)
        if let last = client.lines.finish() {
            client.connection.hold()
            handle(last, client.connection, client.owned)
            client.connection.release()
        }
        client.connection.readingEnded()
    }

    /// A paused client's answers caught up, or room was made (on the thread that ended a
    /// command): the driver is woken to read it again.
    private func caughtUp(_ id: UInt64) {
        caughtUpIDs.withLock { $0.append(id) }
        Task(executorPreference: executor) {}
    }

    /// Puts the paused clients whose answers caught up back in the set (on the driver), and
    /// handles the lines each had read and not handled: nothing new in its socket may wake the
    /// loop for them.
    private func resumeCaughtUp() {
        for id in caughtUpIDs.withLock({ ids in defer { ids = [] }; return ids }) where paused.remove(id) != nil {
            guard let client = clients[id] else { continue }
            register(client.descriptor, id: id)
            handleLines(of: client, id: id)
        }
    }

    /// The client went away: it cancels only the sends it asked to, and its connection closes.
    private func drop(_ client: Client, id: UInt64) {
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, client.descriptor, nil)
        Glibc.close(client.descriptor)
        clients[id] = nil
        for ticket in client.owned.all { ticket.cancel() }
        client.connection.close()
        // A descriptor is free again: the reserve first, then the listener back in the set.
        reserve.replenish()
        if listenerPaused {
            listenerPaused = false
            register(listener, id: Self.listenerID)
        }
    }

    private func pauseListener() {
        listenerPaused = true
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, listener, nil)
    }

    /// Counts a refused connection, and tells `onRefused` of those so far at most every 10 s.
    private func noteRefusal() {
        refusedUntold += 1
        guard lastToldOfRefusals.map({ ContinuousClock.now - $0 >= .seconds(10) }) ?? true else { return }
        onRefused(refusedUntold)
        refusedUntold = 0
        lastToldOfRefusals = .now
    }
}
