import CommandBus
import CommandBusSQLite
import Foundation
import Synchronization
import Testing

/// How the SQLite journal groups writes into commits and when a commit syncs, seen through its
/// commit observer on a real file.
struct JournalCommitTests {
    /// A journal in a fresh directory that remembers every commit it makes.
    final class Recorded: Sendable {
        let directory: TemporaryDirectory
        let journal: SQLiteJournal
        private let seen = Mutex<[JournalCommit]>([])

        init(_ durability: SQLiteJournal.Durability, unwaitedDelay: Duration = SQLiteJournal.unwaitedWriteDelay) throws {
            directory = try TemporaryDirectory("cmdbus-commits")
            journal = try SQLiteJournal(
                path: directory.file("journal.sqlite").path, durability: durability, create: true, readOnly: false, unwaitedDelay: unwaitedDelay
            )
            journal.observeCommits { [weak self] commit in self?.seen.withLock { $0.append(commit) } }
        }

        var commits: [JournalCommit] { seen.withLock { $0 } }

        func accept(_ envelope: CommandEnvelope) async throws {
            try await journal.accept(envelope, payload: Data(#"{"value":1}"#.utf8))
        }

        func start(_ envelope: CommandEnvelope) async throws {
            try await journal.update(JournalUpdate(id: envelope.id, state: .running, attempts: 1), waitUntilDurable: false)
        }

        func end(_ envelope: CommandEnvelope) async throws {
            try await journal.update(JournalUpdate(id: envelope.id, state: .succeeded, attempts: 1, result: Data("{}".utf8)), waitUntilDurable: true)
        }
    }

    static func envelope() -> CommandEnvelope { CommandEnvelope(commandName: "ping") }

    /// A command's `running` waits for company; the timer set for an earlier command's `running`
    /// (whose ending already took it) must not commit this one's alone when it fires.
    @Test func anEarlierCommandsTimerDoesNotSplitTheNextCommandsStartFromItsEnding() async throws {
        // Long enough that the sleeps below sit far from either timer on a busy machine.
        let recorded = try Recorded(.batched(maxDelay: .zero), unwaitedDelay: .seconds(1))
        defer { recorded.directory.remove() }
        let first = Self.envelope(), second = Self.envelope()
        try await recorded.accept(first)
        try await recorded.start(first)  // the first timer: fires at about 1.0 s
        try await recorded.end(first)
        try await recorded.accept(second)
        try await Task.sleep(for: .milliseconds(500))
        try await recorded.start(second)  // the second timer: about 1.5 s
        try await Task.sleep(for: .milliseconds(700))  // past the first timer, short of the second
        try await recorded.end(second)

        #expect(recorded.commits.map(\.writes) == [1, 2, 1, 2])
        let record = try #require(try await recorded.journal.record(second.id))
        #expect(record.state == .succeeded && record.startedAt != nil)
    }

    /// The default syncs the write-ahead and the ending; `.deferred` commits the write-ahead
    /// (another connection sees it at once) and syncs only the ending.
    @Test(arguments: [false, true])
    func deferredDurabilitySyncsOncePerCommand(deferred: Bool) async throws {
        let recorded = try Recorded(deferred ? .deferred : .batched(maxDelay: .zero))
        defer { recorded.directory.remove() }
        let command = Self.envelope()
        try await recorded.accept(command)

        let reader = try SQLiteJournal(path: recorded.journal.path, create: false, readOnly: true)
        #expect(try await reader.record(command.id)?.state == .pending)

        try await recorded.start(command)
        try await recorded.end(command)
        #expect(recorded.commits.map(\.synced) == [!deferred, true])
        #expect(try await reader.record(command.id)?.state == .succeeded)
    }

    /// A commit of writes nobody waits for leaves its sync to the next one, in every mode but `.synced`.
    @Test func onlyAWaitedWriteMakesACommitSync() async throws {
        let recorded = try Recorded(.batched(maxDelay: .zero), unwaitedDelay: .milliseconds(1))
        defer { recorded.directory.remove() }
        let command = Self.envelope()
        try await recorded.accept(command)
        try await recorded.start(command)
        try await Task.sleep(for: .milliseconds(200))  // its timer commits the start alone
        try await recorded.end(command)
        #expect(recorded.commits.map(\.synced) == [true, false, true])

        let synced = try Recorded(.synced, unwaitedDelay: .milliseconds(1))
        defer { synced.directory.remove() }
        try await synced.accept(command)
        try await synced.start(command)
        try await Task.sleep(for: .milliseconds(200))
        try await synced.end(command)
        #expect(synced.commits.map(\.synced) == [true, true, true])
    }
}
