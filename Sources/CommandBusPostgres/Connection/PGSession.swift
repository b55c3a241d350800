import CommandBusSupport
import Glibc

/// A connection that comes back: on a connection failure it reconnects with backoff (100 ms,
/// doubling to 2 s), re-runs its `LISTEN`s, and the caller retries what failed.
///
/// Used by one thread at a time, like the connection under it.
package final class PGSession {
    private let url: String
    private let channels: [String]
    private var connection: PGConnection?
    private var backoff: Duration = .milliseconds(100)
    /// The URL without its password.
    package let redactedURL: String

    /// How long a silent TCP link may last before the connection ends (``PGConnection/init(url:linkTimeout:)``).
    private let linkTimeout: Duration
    /// How the server plans the session's statements (``PGConnection/Planning``).
    private let planning: PGConnection.Planning

    /// A session on `url` that listens on `channels`; connects on first use.
    package init(
        url: String, listening channels: [String] = [], linkTimeout: Duration = PGConnection.defaultLinkTimeout,
        planning: PGConnection.Planning = .forEachRun
    ) {
        self.url = url
        self.planning = planning
        self.channels = channels
        self.linkTimeout = linkTimeout
        redactedURL = PGURL.redacted(url)
    }

    /// The connection, (re)connecting first if needed.
    package func connected() throws(PGError) -> PGConnection {
        if let connection, connection.isStillOpen { return connection }
        connection = nil
        let fresh = try PGConnection(url: url, linkTimeout: linkTimeout, planning: planning)
        for channel in channels { try fresh.execute("LISTEN \(channel)") }
        connection = fresh
        backoff = .milliseconds(100)
        return fresh
    }

    /// Runs `body` on the connection; on a connection problem drops it, so the next call reconnects.
    package func run<T>(_ body: (PGConnection) throws(PGError) -> T) throws(PGError) -> T {
        do {
            return try body(try connected())
        } catch {
            if error.isConnectionProblem { connection = nil }
            throw error
        }
    }

    /// Waits out the current backoff (or until `wake` is signalled) and doubles it, up to
    /// `limit` (2 s unless a caller needs to be back sooner): call after a connection problem.
    package func backOff(wake: WakeSignal? = nil, limit: Duration = .seconds(2)) {
        let delay = min(backoff, limit)
        backoff = min(backoff * 2, limit)
        (wake ?? pause).wait(upTo: delay)
    }
    private let pause = WakeSignal()

    /// Waits up to `timeout` for notifications, or until `wake` is signalled.
    package func notifications(waitingUpTo timeout: Duration, wake: WakeSignal? = nil) throws(PGError) -> [PGNotification] {
        try run { connection throws(PGError) in try connection.notifications(waitingUpTo: timeout, wake: wake) }
    }

    /// Drops the connection (it closes when released).
    package func close() { connection = nil }
}
