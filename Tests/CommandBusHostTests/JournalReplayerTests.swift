import CommandBus
import CommandBusSQLite
import Foundation
import Synchronization
import Testing

/// A replay reads the journal a page at a time, and reads the next page while this one runs.
/// Across page boundaries, every succeeded entry runs once and in journal order, the skipped ones
/// stay skipped, and a payload that no longer decodes is marked failed where it stands.
struct JournalReplayerTests {
    struct Step: Command {
        typealias Result = Int
        static let name = "step"
        var value: Int
    }

    /// Keeps the values it ran, in order.
    final class Recorder: CommandHandler {
        let seen = Mutex<[Int]>([])
        func handle(_ command: Step, context: CommandContext) async throws -> Int {
            seen.withLock { $0.append(command.value) }
            return command.value
        }
    }

    /// A journal of `count` steps `0..<count` ending as `ending(value)` says.
    static func journal(at path: String, count: Int, ending: (Int) -> CommandState = { _ in .succeeded }) async throws -> (SQLiteJournal, [UUID]) {
        let journal = try SQLiteJournal(path: path)
        var ids: [UUID] = []
        for value in 0..<count {
            let envelope = CommandEnvelope(commandName: Step.name)
            // Value 13's payload no longer decodes as a step: its plugin changed since.
            let payload = value == 13 ? #"{"value":"thirteen"}"# : #"{"value":\#(value)}"#
            try await journal.accept(envelope, payload: Data(payload.utf8))
            try await journal.update(JournalUpdate(id: envelope.id, state: ending(value), attempts: 1, result: Data("1".utf8)), waitUntilDurable: false)
            ids.append(envelope.id)
        }
        try await journal.flush()
        return (journal, ids)
    }

    @Test(arguments: [1, 7, 10, 50, 10_000])
    func everySucceededEntryRunsOnceInOrderAcrossPages(pageSize: Int) async throws {
        let work = try TemporaryDirectory("cmdbus-replayer")
        defer { work.remove() }
        // Every fifth command failed, and so is not replayed; 13 cannot be decoded any more.
        let (journal, ids) = try await Self.journal(at: work.file("journal.sqlite").path, count: 50) { $0 % 5 == 4 ? .failed : .succeeded }
        try await journal.setExcluded(ids[20], true)
        let recorder = Recorder()
        let bus = CommandBus()
        bus.register(recorder)

        let report = try await JournalReplayer(bus: bus, journal: journal, pageSize: pageSize).replay()

        let expected = (0..<50).filter { $0 % 5 != 4 && $0 != 13 && $0 != 20 }
        #expect(recorder.seen.withLock { $0 } == expected)
        #expect(report.replayed == expected.count)
        #expect(report.failed == 1)
        #expect(report.failures.count == 1 && report.failures[0].hasPrefix(ids[13].uuidString))
        let stale = try #require(try await journal.record(ids[13]))
        #expect(stale.state == .failed)
        #expect(stale.errorMessage?.contains("stale payload") == true)
    }

    @Test func aRangeAndANameFilterHoldAcrossPages() async throws {
        let work = try TemporaryDirectory("cmdbus-replayer")
        defer { work.remove() }
        let (journal, _) = try await Self.journal(at: work.file("journal.sqlite").path, count: 30)
        let recorder = Recorder()
        let bus = CommandBus()
        bus.register(recorder)

        // Sequence numbers are 1-based: after 5 through 25 is steps 5...24.
        let ranged = try await JournalReplayer(bus: bus, journal: journal, pageSize: 4).replay(after: 5, through: 25)
        #expect(recorder.seen.withLock { $0 } == Array(5...24).filter { $0 != 13 })
        #expect(ranged.replayed == 19)

        let none = try await JournalReplayer(bus: bus, journal: journal, pageSize: 4).replay(commands: ["something else"])
        #expect(none.replayed == 0 && none.failed == 0)
    }
}
