/// The bounds an HTTP server holds every client to, so no client can hold up the rest.
package struct HTTPLimits: Sendable {
    /// The request line and header fields together.
    package var maxHeadBytes = 16 * 1024
    /// Header fields in one request.
    package var maxHeaderFields = 64
    /// The request target (path and query).
    package var maxTargetBytes = 4 * 1024
    /// A request body.
    package var maxBodyBytes = 64 * 1024
    /// From a request's first byte (or the connection's start) to its last: a client that sends
    /// one byte a second is answered 408 and closed when this runs out.
    package var requestTimeout: Duration = .seconds(10)
    /// How long an idle keep-alive connection stays open.
    package var idleTimeout: Duration = .seconds(30)
    /// How long a response may wait on a client that reads nothing before it is closed.
    package var writeTimeout: Duration = .seconds(30)
    /// Bytes queued for one client that is not reading (a stalled event stream) before it is closed.
    package var maxQueuedBytes = 4 * 1024 * 1024
    /// Open connections; more are answered 503 and closed.
    package var maxConnections = 4096

    /// The defaults.
    package init() {}
}
