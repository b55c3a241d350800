import CommandBusSupport
import Glibc
import CEpoll

/// The thread that owns an ``HTTPServer``'s sockets: accepts, reads, parses, writes and times out.
///
/// Everything here runs on that one thread, so the connections need no locks; handler tasks
/// reach it only through ``HTTPServer/deliver(_:)``.
final class HTTPEventLoop {
    private let server: HTTPServer
    private let parser: HTTPRequestParser
    private var connections: [UInt64: HTTPConnection] = [:]
    private var nextID: UInt64 = 2
    private var lastSweep = ContinuousClock.now
    /// For refusing connections while the process is out of descriptors.
    private var reserve = DescriptorReserve()
    private static let noDescriptorResponse: [UInt8] = {
        let busy = HTTPResponse.error(503, "the server has no file descriptor free for another connection; try again later")
        return busy.head(keepAlive: false) + (busy.bodyBytes ?? [])
    }()
    private static let listenerID: UInt64 = 0
    private static let wakeupID: UInt64 = 1
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)

    init(server: HTTPServer) {
        self.server = server
        parser = HTTPRequestParser(limits: server.limits)
    }

    func run() -> Never {
        register(server.listener.descriptor, id: Self.listenerID, events: EPOLLIN.rawValue)
        register(server.wakeupDescriptor, id: Self.wakeupID, events: EPOLLIN.rawValue)
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while true {
            // Timeouts are checked at most twice a second; with no connection there is nothing to time out.
            let wait: Int32 = connections.isEmpty ? -1 : 500
            let count = epoll_wait(server.epollDescriptor, &events, Int32(events.count), wait)
            if count < 0 && errno != EINTR { continue }
            for event in events.prefix(max(0, Int(count))) {
                switch event.data.u64 {
                case Self.listenerID: acceptAll()
                case Self.wakeupID: for delivery in server.takeDeliveries() { apply(delivery) }
                case let id: if let connection = connections[id] { service(connection, events: event.events) }
                }
            }
            let now = ContinuousClock.now
            if now - lastSweep >= .milliseconds(250) {
                lastSweep = now
                sweep(now)
            }
        }
    }

    // MARK: Connections

    private func acceptAll() {
        while true {
            let descriptor = accept(server.listener.descriptor, nil, nil)
            if descriptor < 0 {
                // Out of descriptors: refuse what waits with a 503, from the reserve, rather than
                // leave it hanging while the listener, ready all the while, spins this loop.
                if errno == EMFILE || errno == ENFILE, reserve.refuseOne(on: server.listener.descriptor, saying: Self.noDescriptorResponse) { continue }
                return
            }
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            guard connections.count < server.limits.maxConnections else {
                let busy = HTTPResponse.error(503, "too many connections; try again later")
                let bytes = busy.head(keepAlive: false) + (busy.bodyBytes ?? [])
                _ = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(descriptor)
                continue
            }
            var one: Int32 = 1
            setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let connection = HTTPConnection(id: nextID, descriptor: descriptor, idleUntil: .now + server.limits.requestTimeout)
            nextID += 1
            connections[connection.id] = connection
            server.connectionOpened()
            register(descriptor, id: connection.id, events: EPOLLIN.rawValue)
            connection.interest = EPOLLIN.rawValue
        }
    }

    private func service(_ connection: HTTPConnection, events: UInt32) {
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 && events & EPOLLIN.rawValue == 0 {
            return closeConnection(connection)
        }
        if events & EPOLLIN.rawValue != 0 {
            guard readAvailable(connection) else { return closeConnection(connection) }
            if connection.phase == .reading { parseRequests(connection) }
            // The client shut its side with no whole request left to answer.
            if connection.readClosed && connection.phase == .reading { return closeConnection(connection) }
        }
        if events & EPOLLOUT.rawValue != 0 { flush(connection) }
        if connections[connection.id] != nil { updateInterest(connection) }
    }

    /// Reads what the socket has; `false` if the peer closed or the read failed.
    private func readAvailable(_ connection: HTTPConnection) -> Bool {
        while true {
            let count = readBuffer.withUnsafeMutableBytes { recv(connection.descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                // While a request is handled or a stream is open, what the client sends is not a request we answer.
                if connection.phase == .reading {
                    if connection.input.isEmpty { connection.requestDeadline = .now + server.limits.requestTimeout }
                    connection.input.append(contentsOf: readBuffer[..<count])
                    if connection.input.count > server.limits.maxHeadBytes + server.limits.maxBodyBytes + 4 { return true }
                }
                continue
            }
            if count == 0 {
                // The client shut its side (`nc -N`, a health check): what it asked is still
                // answered, a request read whole or one in hand, and then the connection closes.
                // It was closed at once, so a request followed by the end got no answer.
                connection.readClosed = true
                switch connection.phase {
                case .handling: return true
                case .reading: return !connection.input.isEmpty
                case .streaming, .closing: return false
                }
            }
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
        }
    }

    private func parseRequests(_ connection: HTTPConnection) {
        guard connection.phase == .reading, !connection.input.isEmpty else { return }
        switch parser.parse(connection.input) {
        case .needMore:
            break
        case .refused(let status, let reason):
            connection.input = []
            respond(connection, HTTPResponse.error(status, reason), keepAlive: false, headOnly: false)
        case .request(let request, let consumed):
            connection.input.removeFirst(consumed)
            connection.phase = .handling
            connection.keepAlive = request.keepAlive
            server.dispatch(request, connection: connection.id)
        }
    }

    private func apply(_ delivery: HTTPServer.Delivery) {
        switch delivery {
        case .response(let id, let response, let headOnly):
            guard let connection = connections[id], connection.phase == .handling else { return }
            if case .stream(let stream) = response.body, !headOnly {
                connection.output.append(contentsOf: response.head(keepAlive: false))
                connection.phase = .streaming
                connection.stream = server.forward(stream, connection: id)
            } else {
                respond(connection, response, keepAlive: connection.keepAlive, headOnly: headOnly)
            }
            flush(connection)
        case .chunk(let id, let bytes):
            guard let connection = connections[id], connection.phase == .streaming else { return }
            connection.output.append(contentsOf: bytes)
            // A client that reads nothing while its stream grows is dropped, not buffered for ever.
            if connection.output.count - connection.outputStart > server.limits.maxQueuedBytes { return closeConnection(connection) }
            flush(connection)
        case .streamEnded(let id):
            guard let connection = connections[id], connection.phase == .streaming else { return }
            connection.phase = .closing
            flush(connection)
        }
        if let connection = connections[delivery.connectionID] { updateInterest(connection) }
    }

    private func respond(_ connection: HTTPConnection, _ response: HTTPResponse, keepAlive: Bool, headOnly: Bool) {
        connection.output.append(contentsOf: response.head(keepAlive: keepAlive))
        if !headOnly, let body = response.bodyBytes { connection.output.append(contentsOf: body) }
        if keepAlive {
            connection.phase = .reading
            connection.requestDeadline = nil
            connection.idleUntil = .now + server.limits.idleTimeout
        } else {
            connection.phase = .closing
        }
    }

    /// Writes what is queued; closes a connection that is done once its last byte is out.
    private func flush(_ connection: HTTPConnection) {
        while connection.outputStart < connection.output.count {
            let written = connection.output.withUnsafeBytes { buffer in
                send(connection.descriptor, buffer.baseAddress! + connection.outputStart, buffer.count - connection.outputStart, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                connection.outputStart += written
                connection.stalledSince = nil
                continue
            }
            if written < 0 && errno == EINTR { continue }
            if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                if connection.stalledSince == nil { connection.stalledSince = .now }
                return
            }
            return closeConnection(connection)
        }
        connection.output.removeAll(keepingCapacity: connection.phase == .streaming)
        connection.outputStart = 0
        switch connection.phase {
        case .closing: closeConnection(connection)
        case .reading:
            parseRequests(connection)
            if connection.readClosed && connection.phase == .reading { closeConnection(connection) }
        case .handling, .streaming: break
        }
    }

    private func updateInterest(_ connection: HTTPConnection) {
        var wanted: UInt32 = 0
        if (connection.phase == .reading || connection.phase == .streaming) && !connection.readClosed { wanted |= EPOLLIN.rawValue }
        if connection.outputStart < connection.output.count { wanted |= EPOLLOUT.rawValue }
        guard wanted != connection.interest else { return }
        connection.interest = wanted
        var event = epoll_event(events: wanted, data: epoll_data_t(u64: connection.id))
        epoll_ctl(server.epollDescriptor, EPOLL_CTL_MOD, connection.descriptor, &event)
    }

    private func closeConnection(_ connection: HTTPConnection) {
        guard connections.removeValue(forKey: connection.id) != nil else { return }
        epoll_ctl(server.epollDescriptor, EPOLL_CTL_DEL, connection.descriptor, nil)
        close(connection.descriptor)
        reserve.replenish()
        connection.stream?.cancel()
        server.connectionClosed()
    }

    /// Ends what ran out of time: slow requests (408), idle keep-alives, clients that stopped reading.
    private func sweep(_ now: ContinuousClock.Instant) {
        for connection in Array(connections.values) {
            if let stalled = connection.stalledSince, now - stalled > server.limits.writeTimeout {
                closeConnection(connection)
            } else if connection.phase == .reading, let deadline = connection.requestDeadline, now > deadline {
                connection.input = []
                respond(connection, HTTPResponse.error(408, "request took longer than \(server.limits.requestTimeout.spoken) to arrive"), keepAlive: false, headOnly: false)
                flush(connection)
                if connections[connection.id] != nil { updateInterest(connection) }
            } else if connection.phase == .reading, connection.requestDeadline == nil, now > connection.idleUntil {
                closeConnection(connection)
            }
        }
    }

    private func register(_ descriptor: Int32, id: UInt64, events: UInt32) {
        var event = epoll_event(events: events, data: epoll_data_t(u64: id))
        epoll_ctl(server.epollDescriptor, EPOLL_CTL_ADD, descriptor, &event)
    }
}

/// One client connection, as the event loop keeps it.
final class HTTPConnection {
    enum Phase { case reading, handling, streaming, closing }

    let id: UInt64
    let descriptor: Int32
    var phase = Phase.reading
    var input: [UInt8] = []
    var output: [UInt8] = []
    var outputStart = 0
    var keepAlive = true
    /// When the request begun must have arrived whole; `nil` until its first byte.
    var requestDeadline: ContinuousClock.Instant?
    /// When an idle connection (no request begun) is closed.
    var idleUntil: ContinuousClock.Instant
    /// Since when a write has been waiting on the client.
    var stalledSince: ContinuousClock.Instant?
    var stream: Task<Void, Never>?
    var interest: UInt32 = 0
    /// The client shut its side: nothing more will be read.
    var readClosed = false

    init(id: UInt64, descriptor: Int32, idleUntil: ContinuousClock.Instant) {
        self.id = id
        self.descriptor = descriptor
        self.idleUntil = idleUntil
    }
}

extension HTTPServer.Delivery {
    var connectionID: UInt64 {
        switch self {
        case .response(let id, _, _), .chunk(let id, _), .streamEnded(let id): id
        }
    }
}

extension HTTPResponse {
    var bodyBytes: [UInt8]? {
        if case .bytes(let bytes) = body { bytes } else { nil }
    }
}
