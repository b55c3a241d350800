import CommandBusPostgres
import Testing

/// What a failed connection to PostgreSQL tells the user to do, for the messages libpq and the
/// server give (copied from PostgreSQL 15's), and nothing for one it does not know.
struct PGConnectionAdviceTests {
    @Test(arguments: [
        (#"connection to server on socket "/tmp/pg/.s.PGSQL.5432" failed: FATAL:  database "nodb" does not exist"#, "create the database"),
        (#"connection to server on socket "/tmp/pg/.s.PGSQL.5432" failed: FATAL:  role "ada" does not exist"#, "create the role"),
        (#"connection to server at "10.0.0.5", port 5432 failed: FATAL:  password authentication failed for user "ada""#, "check the user's password"),
        (#"connection to server at "10.0.0.5", port 5432 failed: fe_sendauth: no password supplied"#, "check the user's password"),
        (#"connection to server at "10.0.0.5", port 5432 failed: FATAL:  no pg_hba.conf entry for host "10.0.0.9", user "ada", database "x", no encryption"#, "pg_hba.conf"),
        (#"invalid percent-encoded token: "%zz""#, "check the URL's form"),
        (#"invalid URI query parameter: "bogus""#, "check the URL's form"),
        (#"missing "=" after "nonsense" in connection info string"#, "check the URL's form"),
        (#"could not translate host name "db.invalid" to address: Name or service not known"#, "check the host name"),
        (#"connection to server at "10.0.0.5", port 5432 failed: server does not support SSL, but SSL was required"#, "sslmode=disable"),
        (#"connection to server at "10.0.0.5", port 5432 failed: FATAL:  sorry, too many clients already"#, "max_connections"),
        (#"connection to server at "10.0.0.5", port 5432 failed: timeout expired"#, "check the host and port"),
        (#"connection to server on socket "/run/postgresql/.s.PGSQL.5432" failed: timeout expired"#, "did not take the connection on its socket in time"),
    ])
    func aKnownFailureSaysWhatToDo(message: String, advice: String) {
        #expect(PGConnectionAdvice.advice(for: message)?.contains(advice) == true, "\(message)")
    }

    /// libpq's message, made one line for a log line that goes on after it: sentences apart,
    /// a sentence libpq broke across lines whole, and no full stop before what follows.
    @Test func libpqsMessageBecomesOneLineOfSentences() {
        #expect(PGConnection.oneLine("server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n\tbefore or while processing the request.\n")
            == "server closed the connection unexpectedly; This probably means the server terminated abnormally before or while processing the request")
        #expect(PGConnection.oneLine("connection to server on socket \"/tmp/pg/.s.PGSQL.5432\" failed: No such file or directory\n\tIs the server running locally and accepting connections on that socket?\n")
            == "connection to server on socket \"/tmp/pg/.s.PGSQL.5432\" failed: No such file or directory; Is the server running locally and accepting connections on that socket?")
        #expect(PGConnection.oneLine("\n \n") == "unknown error")
    }

    /// libpq's own hint is enough; an unknown message gets nothing rather than a guess.
    @Test(arguments: [
        #"connection to server at "127.0.0.1", port 1 failed: Connection refused; Is the server running on that host and accepting TCP/IP connections?"#,
        "something no one has seen",
    ])
    func otherFailuresGetNoAdvice(message: String) {
        #expect(PGConnectionAdvice.advice(for: message) == nil)
    }
}
