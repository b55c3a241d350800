/// What to do about a statement the server refused for its own state or settings rather than
/// for the statement: it takes no writes (a standby, or a database or role set read-only), its
/// disk is full, or a timeout set on the server cancelled the statement. Such a refusal names
/// the server, as a failed connection does, and says what to change; one of the statement's own
/// making (a unique key taken, say) keeps the server's words alone.
package enum PGStatementAdvice {
    /// The message for a statement refused with `sqlState` and the server's `message`, on the
    /// server at `url` (without its password).
    package static func message(_ message: String, sqlState: String, url: String) -> String {
        guard let rule = rules.first(where: { $0.state == sqlState && ($0.marker.map(message.contains) ?? true) }) else { return message }
        return "PostgreSQL at \(url) \(rule.condition) (\(message)): \(rule.advice)"
    }

    private static let rules: [(state: String, marker: String?, condition: String, advice: String)] = [
        (
            "25006", nil, "takes no writes",
            "point the bus URL at the primary server, not a standby (a URL that names several hosts takes target_session_attrs=read-write), and see that neither the database nor the role sets default_transaction_read_only"
        ),
        ("53100", nil, "has no room to write", "free space on the disk that holds its data directory"),
        (
            "57014", "statement timeout", "cancelled a statement at its statement_timeout",
            "turn it off for the bus's role (ALTER ROLE name SET statement_timeout = 0) or raise it"
        ),
        (
            "55P03", "lock timeout", "gave up waiting for a lock at its lock_timeout",
            "turn it off for the bus's role (ALTER ROLE name SET lock_timeout = 0) or raise it"
        ),
    ]
}
