import CommandBusSQLite
import Foundation
import Testing

/// `cmdbus batch FILE | head`: a reader that goes away stops the batch as it stops any tool,
/// by SIGPIPE, once the commands in flight have ended.
struct BatchReaderGoneTests {
    /// Found by hand: `batch | head -1` ended the batch at once, leaving the commands it had in
    /// flight unfinished in the journal, for recovery to run again and for a note on every
    /// later command. Now none is left unfinished, and the rest of the file is not run.
    @Test(.timeLimit(.minutes(2)))
    func aReaderThatGoesAwayLeavesNoCommandUnfinished() async throws {
        let setup = try JournalReliabilityTests.Setup()
        defer { setup.work.remove() }
        let lines = 5_000
        let input = try setup.batchFile(lines, counter: "h")
        let piped = try await runProcess("/bin/bash", [
            "-c", #""$1" batch "$2" --journal "$3" --plugins "$4" | head -1; echo "${PIPESTATUS[0]}" >&2"#, "bash",
            try TestPaths.product("cmdbus").path, input, setup.journal, setup.plugins.path,
        ], directory: setup.work.url)
        #expect(piped.stdout.hasPrefix("{") && piped.stdout.split(separator: "\n").count == 1, "\(piped.stdout)")
        #expect(piped.stderr.split(separator: "\n").last == "141", "ended by SIGPIPE, as a tool whose reader left: \(piped.stderr)")

        let database = try SQLiteDatabase(path: setup.journal, create: false, readOnly: true)
        defer { database.close() }
        let unfinished = try database.integer("SELECT count(*) FROM entries WHERE state IN ('pending', 'running')")
        let journaled = try database.integer("SELECT count(*) FROM entries")
        #expect(unfinished == 0, "\(unfinished) of \(journaled) commands left unfinished")
        #expect(journaled >= 1 && journaled < lines, "the batch stopped with its reader: \(journaled) of \(lines) ran")
        let later = try await setup.run("run", "counter.get", "-p", "counter=h")
        #expect(later.status == 0 && !later.stderr.contains("left unfinished"), "\(later.stderr)")
    }
}
