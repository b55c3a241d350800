import CommandBusSupport
import Synchronization
import Glibc
import CEpoll

/// A small HTTP/1.1 server: one `epoll` thread for every connection, handlers as tasks.
///
/// The loop thread owns the sockets and never waits on a client: reads and writes are
/// non-blocking, so a client that sends a byte a second, or never reads, holds up nobody
/// else; it is answered 408 or closed when its time runs out (``HTTPLimits``). A handler
/// runs as a task and hands its response back through a queue and an `eventfd`. A streamed
/// body (Server-Sent Events) stays open until its stream ends or the client goes away,
/// which cancels the stream.
package final class HTTPServer: Sendable {
    /// Answers one request.
    package typealias Handler = @Sendable (HTTPRequest) async -> HTTPResponse

    /// Where it listens.
    package let listener: TCPListener
    package let limits: HTTPLimits
    private let handler: Handler
    private let epoll: Int32
    private let wakeup: Int32
    private let inbox = Mutex<[Delivery]>([])
    private let connectionCount = Atomic<Int>(0)

    /// What a handler's task hands back to the loop.
    enum Delivery: Sendable {
        case response(UInt64, HTTPResponse, headOnly: Bool)
        case chunk(UInt64, [UInt8])
        case streamEnded(UInt64)
    }

    /// A server on `listener`; call ``start()`` to serve.
    package init(listener: TCPListener, limits: HTTPLimits = HTTPLimits(), handler: @escaping Handler) {
        self.listener = listener
        self.limits = limits
        self.handler = handler
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeup = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        Self.raiseDescriptorLimit()
    }

    /// Connections open now.
    package var openConnections: Int { connectionCount.load(ordering: .relaxed) }

    /// Starts the loop on a thread of its own.
    package func start() {
        DetachedThread.start(named: "http") { [self] in
            let loop = HTTPEventLoop(server: self)
            loop.run()
        }
    }

    /// A thousand event streams need a thousand descriptors: take the soft limit up to the hard one.
    private static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = min(limit.rlim_max, 65_536)
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    // MARK: Used by the loop and the handler tasks

    var epollDescriptor: Int32 { epoll }
    var wakeupDescriptor: Int32 { wakeup }

    func connectionOpened() { connectionCount.add(1, ordering: .relaxed) }
    func connectionClosed() { connectionCount.subtract(1, ordering: .relaxed) }

    /// Runs the handler for a request of connection `id` and hands the response to the loop.
    func dispatch(_ request: HTTPRequest, connection id: UInt64) {
        Task { [self] in
            let response = await handler(request)
            deliver(.response(id, response, headOnly: request.method == "HEAD"))
        }
    }

    /// Forwards a streamed body's chunks to the loop until the stream ends or the task is cancelled.
    func forward(_ stream: AsyncStream<[UInt8]>, connection id: UInt64) -> Task<Void, Never> {
        Task { [self] in
            for await chunk in stream { deliver(.chunk(id, chunk)) }
            deliver(.streamEnded(id))
        }
    }

    func deliver(_ delivery: Delivery) {
        let first = inbox.withLock { inbox in
            inbox.append(delivery)
            return inbox.count == 1
        }
        if first {
            var one: UInt64 = 1
            _ = write(wakeup, &one, 8)
        }
    }

    func takeDeliveries() -> [Delivery] {
        var count: UInt64 = 0
        _ = read(wakeup, &count, 8)
        return inbox.withLock { inbox in
            defer { inbox.removeAll(keepingCapacity: true) }
            return inbox
        }
    }
}
