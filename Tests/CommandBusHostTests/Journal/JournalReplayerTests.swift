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

    /// Sends a step for each value (and a batch of `inner` under it, if any), then fails if asked.
    struct Batch: Command {
        typealias Result = Int
        static let name = "batch"
        var values: [Int]
        var inner: [Int]? = nil
        var failAfterwards = false
    }

    struct Batches: CommandHandler {
        struct Refused: Error {}
        func handle(_ command: Batch, context: CommandContext) async throws -> Int {
            for value in command.values { _ = try await context.send(Step(value: value)) }
            if let inner = command.inner { _ = try await context.send(Batch(values: inner)) }
            if command.failAfterwards { throw Refused() }
            return command.values.count
        }
    }

    /// A parent that runs again sends its subcommands anew, so they are not run a second time; a
    /// subcommand whose parent failed runs on its own; one whose parent was taken out of replay goes
    /// with it. Whether the parent is in the same page, an earlier one, or two levels up.
    @Test(arguments: [1, 2, 100])
    func subcommandsRunOnceUnderTheirParents(pageSize: Int) async throws {
        let work = try TemporaryDirectory("cmdbus-replayer")
        defer { work.remove() }
        let journal = try SQLiteJournal(path: work.file("journal.sqlite").path)
        let original = CommandBus(configuration: .init(journal: journal))
        original.register(Recorder())
        original.register(Batches())
        _ = try await original.send(Batch(values: [1, 2]))
        _ = try? await original.send(Batch(values: [3], failAfterwards: true))
        _ = try await original.send(Batch(values: [4, 5]))
        _ = try await original.send(Step(value: 6))
        _ = try await original.send(Batch(values: [7], inner: [8]))
        try await journal.flush()
        let dropped = try #require(try await journal.records(JournalQuery(commandName: Batch.name)).first { String(decoding: $0.payload, as: UTF8.self).contains("[4,5]") })
        try await journal.setExcluded(dropped.envelope.id, true)

        let recorder = Recorder()
        let bus = CommandBus()
        bus.register(recorder)
        bus.register(Batches())
        let report = try await JournalReplayer(bus: bus, journal: journal, pageSize: pageSize).replay()

        #expect(recorder.seen.withLock { $0 } == [1, 2, 3, 6, 7, 8])
        // Run on their own: the first batch, step 3, step 6 and the outer batch of 7.
        #expect(report.replayed == 4 && report.failed == 0, "\(report)")
        // Left to their parents: steps 1, 2 and 7, the inner batch and its step 8.
        #expect(report.sentByParents == 5, "\(report)")
    }
}
