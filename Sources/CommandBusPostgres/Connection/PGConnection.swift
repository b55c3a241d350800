import CLibPQ
import CommandBusSupport
import Glibc
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One libpq connection, used by one thread at a time. Every statement is parameterized: values
/// travel apart from the SQL, as text or binary, never spliced into it.
package final class PGConnection: @unchecked Sendable {
    private let connection: OpaquePointer
    private let pq: LibPQ
    /// The URL with its password removed, for messages.
    package let redactedURL: String

    /// Connects to `url` (a `postgres://` URL or a libpq `key=value` string; libpq reads
    /// `sslmode`, `PGPASSWORD` and the rest as it documents).
    ///
    /// Over TCP, a link that goes silent (a cable cut, a database host that vanished, an address
    /// that moved in a failover) ends the connection within about `linkTimeout`, with TCP
    /// keepalives for an idle connection and `tcp_user_timeout` for one that waits for an
    /// answer; without them a statement waits for the kernel to give up, some fifteen minutes.
    /// A connection attempt with no answer gives up as soon, or after 10 s. A URL that sets
    /// `connect_timeout`, `keepalives…` or `tcp_user_timeout` itself keeps its own values. A long
    /// statement is not cut short: the server's kernel answers while it runs.
    ///
    /// With `planning` ``Planning/once``, each prepared statement is planned once for the
    /// connection (``Planning``).
    package init(url: String, linkTimeout: Duration = PGConnection.defaultLinkTimeout, planning: Planning = .forEachRun) throws(PGError) {
        let redacted = PGURL.redacted(url)
        let pq = try LibPQ.get()
        guard let connection = Self.connect(url, linkTimeout: linkTimeout, pq) else {
            throw PGError(.connectionFailed, "cannot allocate a PostgreSQL connection")
        }
        // Checked before any property is set: a throwing init must not run deinit over a finished connection.
        guard pq.status(connection) == CONNECTION_OK else {
            let message = Self.message(of: connection, pq)
            pq.finish(connection)
            let advice = PGConnectionAdvice.advice(for: message).map { "; " + $0 } ?? ""
            throw PGError(.connectionFailed, "cannot connect to PostgreSQL at \(redacted): \(message)\(advice)")
        }
        self.connection = connection
        self.pq = pq
        redactedURL = redacted
        _ = pq.setnonblocking(connection, 0)
        // Server notices (such as "already exists, skipping") are not for the user's terminal.
        _ = pq.setNoticeProcessor(connection, { _, _ in }, nil)
        try execute(Self.sessionSettings)
        if planning == .once { for setting in Self.planningOnce { try execute(setting) } }
    }

    /// How the server plans a prepared statement's runs on a connection.
    package enum Planning: Sendable {
        /// PostgreSQL's own choice (`plan_cache_mode = auto`): a plan for each run's parameters,
        /// unless five runs' plans say one plan for all would cost no more to run. Right for a
        /// statement whose best plan depends on its parameters, such as a list's optional
        /// filters (`$1 IS NULL OR name = $1`).
        case forEachRun
        /// One plan for every run (`force_generic_plan`), made at the first, and made to find
        /// rows by an index (`enable_seqscan = off`). For the statements a host runs for every
        /// command, which planning cost more than running: the claim's plan took 0.3 to 0.45 ms
        /// a claim, its run 0.1 to 0.2, and PostgreSQL went on planning it anew, as the one
        /// plan's estimate (ten names for the `unnest` of a parameter) looked dearer than the
        /// plans made for one name.
        ///
        /// A plan made once lasts until the table's statistics change (an autovacuum's analyze),
        /// so it must not rest on the table's size when it was made: made on a new bus of a few
        /// hundred commands, the claim's update read the whole table to join the commands it
        /// picked (a hash join; 4 ms a claim once the table had 8,000), where an index finds
        /// each. Without a sequential scan to choose, each statement finds its rows as it would
        /// on a table of millions. A statement run this way names its states
        /// (`state = 'pending'`), as the one plan cannot use a partial index for a parameter's
        /// value, and reads rows it can find by an index.
        ///
        /// A host's claimer, finisher and subcommand poster and a client's result waiter plan
        /// this way. A client's other statements (`bus status` counts whole queues) and the
        /// journal's lists (optional filters, `$1 IS NULL OR name = $1`) plan for each run.
        case once
    }

    /// What a connection with ``Planning/once`` sets after ``sessionSettings``.
    static let planningOnce = ["SET plan_cache_mode = force_generic_plan", "SET enable_seqscan = off"]

    /// What every connection sets first. JIT compilation off: the bus's statements each touch a
    /// few rows, but on a table of millions the planner's estimate of the claim crosses
    /// `jit_above_cost`, and compiling it took 35 of its 46 ms (2.6 million commands, 600,000 of
    /// them pending: one host claimed 550 a second, and 2,500 without it).
    static let sessionSettings = "SET jit = off"

    deinit { pq.finish(connection) }

    /// How long a silent TCP link may last before a connection ends, unless told otherwise.
    package static let defaultLinkTimeout: Duration = .seconds(30)

    /// The libpq settings that end a connection whose TCP link went silent for `timeout`:
    /// keepalive probes after a third of it, every sixth, three unanswered; unacknowledged data
    /// for all of it; and a connection attempt with no answer for as long, or 10 s if that is
    /// longer (the kernel's SYN retries take about two minutes; the attempt includes the
    /// server's start of a backend, which a loaded machine can slow). Whole seconds, at least
    /// one, as libpq takes them.
    static func linkSettings(_ timeout: Duration) -> [(key: String, value: String)] {
        let seconds = max(1, Int(timeout.components.seconds))
        return [
            ("connect_timeout", String(max(10, seconds))),
            ("keepalives", "1"),
            ("keepalives_idle", String(max(1, seconds / 3))),
            ("keepalives_interval", String(max(1, seconds / 6))),
            ("keepalives_count", "3"),
            ("tcp_user_timeout", String(max(1_000, Int(timeout.milliseconds)))),
        ]
    }

    /// `PQconnectdbParams` with ``linkSettings(_:)`` first and `url` expanded after them, so the
    /// URL's own settings win.
    private static func connect(_ url: String, linkTimeout: Duration, _ pq: LibPQ) -> OpaquePointer? {
        let settings = linkSettings(linkTimeout) + [("dbname", url)]
        let strings = settings.flatMap { [strdup($0.key), strdup($0.value)] }
        defer { for string in strings { free(string) } }
        let keys = stride(from: 0, to: strings.count, by: 2).map { UnsafePointer(strings[$0]) } + [nil]
        let values = stride(from: 1, to: strings.count, by: 2).map { UnsafePointer(strings[$0]) } + [nil]
        return pq.connectdbParams(keys, values, 1)
    }

    /// Whether the connection is still usable.
    package var isHealthy: Bool { pq.status(connection) == CONNECTION_OK }

    /// Whether the server has left the connection open while it sat idle, asked without a round
    /// trip: a socket with nothing to read is open; one with something is read, and open unless
    /// that was the server's goodbye (`idle_session_timeout`, a restart, a pooler's idle timer)
    /// or the stream's end. A notification read here waits for ``notifications(waitingUpTo:wake:)``.
    /// A connection found closed so is replaced before a statement is sent on it, where the
    /// statement failed and the host warned of a lost connection at every use after an idle spell.
    package var isStillOpen: Bool {
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        // The goodbye reads as a message first; the stream's end, read next, is what closes it.
        for _ in 0..<4 where isHealthy {
            guard poll(&descriptor, 1, 0) > 0 else { return true }
            guard pq.consumeInput(connection) == 1 else { return false }
        }
        return isHealthy
    }

    /// The socket, for waiting on notifications.
    package var socket: Int32 { pq.socket(connection) }

    /// Statements prepared on this connection, by their SQL: each is parsed once per connection,
    /// and planned as the connection's ``Planning`` says.
    private var prepared: [String: String] = [:]

    /// Runs one statement with `parameters` (`nil` is SQL NULL) and returns its rows. A statement
    /// with parameters is prepared on first use and reused after.
    @discardableResult
    package func execute(_ sql: String, _ parameters: [PGValue?] = []) throws(PGError) -> PGRows {
        let name = parameters.isEmpty ? nil : try preparedName(sql, parameters)
        let result = withParameters(parameters) { types, values, lengths, formats in
            if let name {
                pq.execPrepared(connection, name, Int32(parameters.count), values, lengths, formats, 1)
            } else {
                pq.execParams(connection, sql, Int32(parameters.count), types, values, lengths, formats, 1)
            }
        }
        guard let result else { throw PGError(.connectionLost, "PostgreSQL at \(redactedURL) did not answer: \(Self.message(of: connection, pq))") }
        defer { pq.clear(result) }
        switch pq.resultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            return PGRows(result, pq)
        default:
            throw failure(of: result)
        }
    }

    /// The error a failed result reports: its SQLSTATE and first message line, or a lost connection.
    private func failure(of result: OpaquePointer) -> PGError {
        let state = pq.resultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
        let message = pq.resultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
            ?? pq.resultErrorMessage(result).map { String(cString: $0) } ?? "unknown error"
        let oneLine = message.split(whereSeparator: \.isNewline).first.map(String.init) ?? message
        if !isHealthy { return PGError(.connectionLost, "lost the connection to PostgreSQL at \(redactedURL): \(oneLine)") }
        return PGError(PGError.Code(sqlState: state), PGStatementAdvice.message(oneLine, sqlState: state, url: redactedURL), sqlState: state)
    }

    private func preparedName(_ sql: String, _ parameters: [PGValue?]) throws(PGError) -> String {
        if let name = prepared[sql] { return name }
        let name = "cmdbus_\(prepared.count)"
        let types: [Oid] = parameters.map { $0?.type ?? 0 }
        guard let result = pq.prepare(connection, name, sql, Int32(types.count), types) else {
            throw PGError(.connectionLost, "PostgreSQL at \(redactedURL) did not answer: \(Self.message(of: connection, pq))")
        }
        defer { pq.clear(result) }
        guard pq.resultStatus(result) == PGRES_COMMAND_OK else { throw failure(of: result) }
        prepared[sql] = name
        return name
    }

    /// Runs `body` in one transaction: committed if it returns, rolled back if it throws.
    package func transaction<T>(_ body: () throws(PGError) -> T) throws(PGError) -> T {
        try execute("BEGIN")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
    }

    /// Waits up to `timeout` for notifications, or until `wake` is signalled, and returns those
    /// that arrived (possibly none).
    package func notifications(waitingUpTo timeout: Duration, wake: WakeSignal? = nil) throws(PGError) -> [PGNotification] {
        var found = drainNotifications()
        if !found.isEmpty { return found }
        var descriptors = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0)]
        if let wake { descriptors.append(pollfd(fd: wake.descriptor, events: Int16(POLLIN), revents: 0)) }
        let ready = poll(&descriptors, nfds_t(descriptors.count), Int32(clamping: timeout.milliseconds))
        if ready < 0 && errno != EINTR { throw PGError(.connectionLost, "cannot wait on PostgreSQL at \(redactedURL)") }
        if descriptors.count > 1, descriptors[1].revents != 0 { wake?.clear() }
        if ready > 0, descriptors[0].revents != 0 {
            guard pq.consumeInput(connection) == 1 else {
                throw PGError(.connectionLost, "lost the connection to PostgreSQL at \(redactedURL): \(Self.message(of: connection, pq))")
            }
            found = drainNotifications()
        }
        return found
    }

    private func drainNotifications() -> [PGNotification] {
        var found: [PGNotification] = []
        while let notification = pq.notifies(connection) {
            found.append(PGNotification(
                channel: String(cString: notification.pointee.relname), payload: String(cString: notification.pointee.extra)
            ))
            pq.freemem(notification)
        }
        return found
    }

    private static func message(of connection: OpaquePointer, _ pq: LibPQ) -> String {
        oneLine(pq.errorMessage(connection).map { String(cString: $0) } ?? "unknown error")
    }

    /// libpq's message on one line, for a log line that goes on after it: its lines joined with
    /// "; ", but a line that goes on a sentence (it starts in lower case) with a space, and
    /// without the last line's full stop. "server closed the connection unexpectedly\n\tThis
    /// probably means the server terminated abnormally\n\tbefore or while processing the
    /// request.\n" was "…abnormally; before or while processing the request."
    package static func oneLine(_ text: String) -> String {
        let lines = text.split(whereSeparator: \.isNewline).map { line in
            String(line.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        }.filter { !$0.isEmpty }
        var joined = ""
        for line in lines {
            if !joined.isEmpty { joined += line.first?.isLowercase == true ? " " : "; " }
            joined += line
        }
        if joined.hasSuffix("."), !joined.hasSuffix("..") { joined.removeLast() }
        return joined.isEmpty ? "unknown error" : joined
    }

    /// Lays the parameters out as libpq wants them: text for strings and numbers, binary for bytes.
    private func withParameters<R>(
        _ parameters: [PGValue?],
        _ body: (UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> R
    ) -> R {
        var buffers: [[UInt8]?] = parameters.map { value in value.map(\.bytes) }
        let types: [Oid] = parameters.map { $0?.type ?? 0 }
        let formats: [Int32] = parameters.map { $0?.isBinary == true ? 1 : 0 }
        let lengths: [Int32] = buffers.map { Int32($0?.count ?? 0) }
        // Text values need their NUL; binary ones are measured by length.
        for index in buffers.indices where formats[index] == 0 { buffers[index]?.append(0) }
        return withPointers(buffers, index: 0, collected: []) { pointers in
            pointers.withUnsafeBufferPointer { values in
                body(types, values.baseAddress, lengths, formats)
            }
        }
    }

    private func withPointers<R>(
        _ buffers: [[UInt8]?], index: Int, collected: [UnsafePointer<CChar>?], _ body: ([UnsafePointer<CChar>?]) -> R
    ) -> R {
        guard index < buffers.count else { return body(collected) }
        guard let buffer = buffers[index] else { return withPointers(buffers, index: index + 1, collected: collected + [nil], body) }
        return buffer.withUnsafeBufferPointer { raw in
            raw.withMemoryRebound(to: CChar.self) { chars in
                withPointers(buffers, index: index + 1, collected: collected + [chars.baseAddress], body)
            }
        }
    }
}

/// A notification a `LISTEN`ing connection received.
package struct PGNotification: Sendable, Equatable {
    /// The channel.
    package let channel: String
    /// Its payload.
    package let payload: String
}
