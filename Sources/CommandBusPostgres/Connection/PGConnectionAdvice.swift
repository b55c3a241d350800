/// What to do about a failed connection, read from libpq's message: a database or role that
/// does not exist, a refused password, a malformed URL, nothing answering at the address. The
/// messages are libpq's and the server's English ones (the process never calls `setlocale`);
/// one it does not know gets no advice, rather than a wrong one, and nothing is added where
/// libpq gave its own hint ("Is the server running on that host…?").
package enum PGConnectionAdvice {
    /// The advice for `message`, to follow it after "; ", or `nil`.
    package static func advice(for message: String) -> String? {
        rules.first { rule in rule.markers.contains { message.contains($0) } && rule.also.allSatisfy { message.contains($0) } }?.advice
    }

    /// Markers (any one) and advice, first match wins; `also` names markers the message must
    /// carry as well.
    private static let rules: [(markers: [String], also: [String], advice: String)] = [
        (["role \""], [], "name a user that exists in the URL (postgres://USER@host/database), or create the role (createuser)"),
        (["\" does not exist"], [], "create the database (createdb NAME) or name one that exists in the URL (postgres://user@host/DATABASE)"),
        (
            ["password authentication failed", "no password supplied", "fe_sendauth"], [],
            "check the user's password (in the URL, $PGPASSWORD or ~/.pgpass)"
        ),
        (["no pg_hba.conf entry", "is not permitted to log in"], [], "the server does not let this user in from here: its administrator can allow it (pg_hba.conf, ALTER ROLE … LOGIN)"),
        (
            ["invalid URI", "invalid percent-encoded", "invalid connection option", "missing \"=\"", "unterminated quoted string", "invalid integer value", "invalid port number", "invalid sslmode"], [],
            "check the URL's form: postgres://user@host:port/database?sslmode=require, or a key=value string"
        ),
        (["could not translate host name"], [], "check the host name in the URL"),
        (["server does not support SSL"], [], "this server takes no TLS: set sslmode=disable or prefer in the URL, or turn on ssl on the server"),
        (["too many clients already", "remaining connection slots are reserved"], [], "the server has no connection free: close idle ones or raise its max_connections"),
        // On a Unix socket there is no network: a server that takes no connection in time is busy or stuck.
        (["timeout expired"], ["on socket"], "the server did not take the connection on its socket in time: it may be starting, overloaded or stuck; see its log (pg_isready tells whether it answers)"),
        (["timeout expired", "Network is unreachable", "No route to host"], [], "check the host and port, and that the network lets this machine reach them"),
    ]
}
