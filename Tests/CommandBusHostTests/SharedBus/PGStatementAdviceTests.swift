import CommandBusPostgres
import CommandBusSupport
import Foundation
import Testing

/// A statement refused for the server's state or settings (a standby, a full disk, a timeout set
/// on the server) names the server and says what to change; one refused for itself keeps the
/// server's words alone.
struct PGStatementAdviceTests {
    @Test(arguments: [
        ("25006", "cannot execute INSERT in a read-only transaction", "takes no writes", "target_session_attrs=read-write"),
        ("53100", #"could not extend file "base/16384/16385": No space left on device"#, "has no room to write", "free space"),
        ("57014", "canceling statement due to statement timeout", "cancelled a statement at its statement_timeout", "SET statement_timeout = 0"),
        ("55P03", "canceling statement due to lock timeout", "gave up waiting for a lock at its lock_timeout", "SET lock_timeout = 0"),
    ])
    func aRefusalForTheServersStateSaysWhatToChange(state: String, message: String, condition: String, advice: String) {
        let worded = PGStatementAdvice.message(message, sqlState: state, url: "postgres://ada:***@db/bus")
        #expect(worded.hasPrefix("PostgreSQL at postgres://ada:***@db/bus \(condition) (\(message)): "), "\(worded)")
        #expect(worded.contains(advice) && !worded.contains("\n"), "\(worded)")
    }

    /// A cancel by someone (`pg_cancel_backend`), not by a timeout, and the statement's own faults get no advice.
    @Test(arguments: [
        ("57014", "canceling statement due to user request"),
        ("23505", #"duplicate key value violates unique constraint "commands_pkey""#),
        ("22P05", "unsupported Unicode escape sequence"),
    ])
    func aRefusalOfTheStatementKeepsTheServersWords(state: String, message: String) {
        #expect(PGStatementAdvice.message(message, sqlState: state, url: "postgres://db/bus") == message)
    }

    /// Found by hand: a bus whose database takes no writes (as a standby) answered
    /// `cannot execute INSERT in a read-only transaction`, naming neither the server nor what to do.
    @Test(.timeLimit(.minutes(2)), .enabled(if: SharedBusDatabase.isAvailable, "needs the PostgreSQL that scripts/test.sh starts"))
    func aBusThatTakesNoWritesOrTimesOutSaysSoInOneLine() async throws {
        let readOnly = try await SharedBusDatabase(), timingOut = try await SharedBusDatabase()
        defer { Task { await readOnly.drop(); await timingOut.drop() } }
        try await SharedBusDatabase.psql(SharedBusDatabase.clusterURL, "ALTER DATABASE \(readOnly.name) SET default_transaction_read_only = on")
        try await SharedBusDatabase.psql(SharedBusDatabase.clusterURL, "ALTER DATABASE \(timingOut.name) SET statement_timeout = '1ms'")
        let plugins = try TemporaryDirectory("cmdbus-pg-advice")
        defer { plugins.remove() }
        try plugins.install("libGreeter.so")
        for (database, words) in [(readOnly, "takes no writes"), (timingOut, "statement_timeout")] {
            for arguments in [["run", "greet", "-p", "name=Ada"], ["serve", "--plugins", plugins.path]] {
                let result = try await cmdbus(arguments + ["--bus", database.url])
                let lines = result.stderr.split(separator: "\n").filter { !$0.contains("debug build") }
                #expect(result.status == 74 && lines.count == 1, "\(arguments[0]): \(result.stderr)")
                #expect(lines.first?.contains("PostgreSQL at \(database.url) ") == true && lines.first?.contains(words) == true, "\(result.stderr)")
            }
        }
    }
}
