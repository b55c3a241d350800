/// A PostgreSQL failure: a code for what kind, and a one-line message that names the server
/// (its URL without the password) and the cause.
package struct PGError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    package enum Code: Sendable, Equatable {
        /// The server could not be reached, or refused the login.
        case connectionFailed
        /// An established connection broke.
        case connectionLost
        /// The user may not read or write what the statement touches.
        case permissionDenied
        /// A unique key was taken.
        case uniqueViolation
        /// Any other error the server reported.
        case statementFailed

        init(sqlState: String) {
            switch sqlState {
            case "42501": self = .permissionDenied
            case "23505": self = .uniqueViolation
            case _ where sqlState.hasPrefix("08") || sqlState.hasPrefix("57P"): self = .connectionLost
            default: self = .statementFailed
            }
        }
    }

    /// What kind of failure.
    package let code: Code
    /// The one-line message.
    package let message: String
    /// The SQLSTATE the server gave, if any.
    package let sqlState: String?

    package init(_ code: Code, _ message: String, sqlState: String? = nil) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
    }

    package var description: String { message }

    /// Whether reconnecting could help.
    package var isConnectionProblem: Bool { code == .connectionFailed || code == .connectionLost }

    /// Whether the server refused what the statement carried (SQLSTATE class 22, a data
    /// exception, or 54, a limit: a `jsonb` value past 256 MiB), so the same statement sent
    /// again is refused again, where a lost connection, a deadlock or a full disk may pass.
    package var refusesTheData: Bool { sqlState.map { $0.hasPrefix("22") || $0.hasPrefix("54") } ?? false }

    /// Whether the server is away for now rather than refusing us: nothing answers at the
    /// address (not started yet, restarting), or what answers is starting up, shutting down
    /// or full, or an open connection broke. Waiting outlasts these; it does not outlast a
    /// refused login, a missing role or database, a TLS mismatch or a host name that does not
    /// resolve, which fail at once.
    ///
    /// libpq's own messages and the system's are in English here (the process never calls
    /// `setlocale`); a server that reports its state in another language is taken as refusing.
    package var isServerAway: Bool {
        code == .connectionLost || (code == .connectionFailed && Self.awayMarkers.contains { message.contains($0) })
    }

    private static let awayMarkers = [
        "Connection refused", "No such file or directory", "timeout expired", "Network is unreachable", "No route to host",
        "Connection reset", "server closed the connection unexpectedly", "the database system is starting up",
        "the database system is shutting down", "the database system is not yet accepting connections",
        "the database system is in recovery mode", "too many clients already", "remaining connection slots are reserved",
    ]
}

/// PostgreSQL URLs as they may be shown.
package enum PGURL {
    /// `url` with any password replaced by `***`, in both URL and `key=value` forms.
    package static func redacted(_ url: String) -> String {
        if let scheme = url.firstRange(of: "://") {
            let rest = url[scheme.upperBound...]
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            var result = String(url[..<scheme.upperBound])
            let authority = rest[..<authorityEnd]
            if let at = authority.lastIndex(of: "@") {
                let userInfo = authority[..<at]
                if let colon = userInfo.firstIndex(of: ":") {
                    result += userInfo[..<colon] + ":***" + authority[at...]
                } else {
                    result += authority
                }
            } else {
                result += authority
            }
            var tail = String(rest[authorityEnd...])
            tail = redactParameter(in: tail, separator: "&", prefix: "password=")
            return result + tail
        }
        return redactParameter(in: url, separator: " ", prefix: "password=")
    }

    private static func redactParameter(in text: String, separator: Character, prefix: String) -> String {
        var pieces: [String] = []
        var current = ""
        for character in text {
            if character == separator || (separator == "&" && character == "?") {
                pieces.append(current)
                pieces.append(String(character))
                current = ""
            } else {
                current.append(character)
            }
        }
        pieces.append(current)
        return pieces.map { $0.lowercased().hasPrefix(prefix) ? prefix + "***" : $0 }.joined()
    }

    /// Whether `url` looks like a PostgreSQL connection string at all.
    package static func isPlausible(_ url: String) -> Bool {
        url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") || url.contains("=")
    }
}
