import CommandBus
import CommandBusSQLite
import Foundation
import Synchronization
import Testing

/// How the SQLite journal groups writes into commits and when a commit syncs, seen through its
/// commit observer on a real file.
struct JournalCommitTests {
    /// A journal in a fresh directory that remembers every commit it makes. Its timers for
    /// writes nobody waits for never fire by themselves: ``fireTimer(_:)`` fires one.
    final class Recorded: Sendable {
        let directory: TemporaryDirectory
        let journal: SQLiteJournal
        private let seen = Mutex<[JournalCommit]>([])
        private let timers = ArmedTimers()

        /// The drains the journal's timers would start, in the order they were armed.
        final class ArmedTimers: Sendable {
            let drains = Mutex<[@Sendable () -> Void]>([])
        }

        init(_ durability: SQLiteJournal.Durability) throws {
            directory = try TemporaryDirectory("cmdbus-commits")
            let timers = self.timers
            journal = try SQLiteJournal(
                path: directory.file("journal.sqlite").path, durability: durability, create: true, readOnly: false,
                unwaitedWriteTimer: { drain in timers.drains.withLock { $0.append(drain) } }
            )
            journal.observeCommits { [weak self] commit in self?.seen.withLock { $0.append(commit) } }
        }

        /// Fires the `index`th timer armed so far, as the journal's queue would once its wait is up.
        func fireTimer(_ index: Int) {
            timers.drains.withLock { $0[index] }()
        }

        var armedTimers: Int { timers.drains.withLock { $0.count } }

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

    /// A command run and ended (its start arms timer 0, and its ending takes the start), then a
    /// second accepted: the second's start begins a new wait while timer 0 is still armed.
    static func secondCommandAccepted(after recorded: Recorded) async throws -> CommandEnvelope {
        let first = envelope(), second = envelope()
        try await recorded.accept(first)
        try await recorded.start(first)
        try await recorded.end(first)
        try await recorded.accept(second)
        return second
    }

    /// A command's `running` waits for company; the timer set for an earlier command's `running`
    /// (whose ending already took it) must not commit this one's alone when it fires. One timer
    /// is armed at a time: the second wait is left to the first timer, which re-arms for it.
    @Test func anEarlierCommandsTimerDoesNotSplitTheNextCommandsStartFromItsEnding() async throws {
        let recorded = try Recorded(.batched(maxDelay: .zero))
        defer { recorded.directory.remove() }
        let second = try await Self.secondCommandAccepted(after: recorded)
        try await recorded.start(second)  // timer 0 is still armed: no other
        #expect(recorded.armedTimers == 1)
        recorded.fireTimer(0)  // the first command's wait is up; it re-arms for the second's (timer 1)
        #expect(recorded.armedTimers == 2)
        try await recorded.end(second)
        recorded.fireTimer(1)

        #expect(recorded.commits.map(\.writes) == [1, 2, 1, 2])
        let record = try #require(try await recorded.journal.record(second.id))
        #expect(record.state == .succeeded && record.startedAt != nil)
    }

    /// The timer re-armed for a later wait commits that wait's writes when it fires: a start
    /// whose command runs long is not left waiting for an ending.
    @Test func aReArmedTimerCommitsTheWaitItWasArmedFor() async throws {
        let recorded = try Recorded(.batched(maxDelay: .zero))
        defer { recorded.directory.remove() }
        let second = try await Self.secondCommandAccepted(after: recorded)
        try await recorded.start(second)
        recorded.fireTimer(0)  // re-arms for the second's start
        #expect(recorded.commits.map(\.writes) == [1, 2, 1])
        recorded.fireTimer(1)  // the second's wait is up: its start is committed alone
        #expect(recorded.commits.map(\.writes) == [1, 2, 1, 1])
        #expect(recorded.armedTimers == 2)
        #expect(try await recorded.journal.record(second.id)?.state == .running)
        try await recorded.end(second)
        #expect(recorded.commits.map(\.writes) == [1, 2, 1, 1, 1])
    }

    /// The default syncs the write-ahead and the ending in SQLite. `.deferred` syncs neither
    /// there: its log (``JournalLogTests``) makes the ending durable, and SQLite commits both
    /// without a sync, soon after (a read in the same process waits for that).
    @Test(arguments: [false, true])
    func deferredDurabilitySyncsOncePerCommand(deferred: Bool) async throws {
        let recorded = try Recorded(deferred ? .deferred : .batched(maxDelay: .zero))
        defer { recorded.directory.remove() }
        let command = Self.envelope()
        try await recorded.accept(command)
        _ = try await recorded.journal.record(command.id)

        let reader = try SQLiteJournal(path: recorded.journal.path, create: false, readOnly: true)
        #expect(try await reader.record(command.id)?.state == .pending)

        // What SQLite will do at the next commit, read back from the connection: the flag the
        // observer hears is only what the journal meant.
        #expect(try await recorded.journal.synchronousSetting() == (deferred ? 1 : 2))
        try await recorded.start(command)
        try await recorded.end(command)
        _ = try await recorded.journal.record(command.id)
        #expect(recorded.commits.map(\.synced) == [!deferred, !deferred])
        #expect(try await recorded.journal.synchronousSetting() == (deferred ? 1 : 2))
        #expect(try await reader.record(command.id)?.state == .succeeded)
    }

    /// A commit of writes nobody waits for leaves its sync to the next one, in every mode but `.synced`.
    @Test(arguments: [false, true])
    func onlyAWaitedWriteMakesACommitSync(synced: Bool) async throws {
        let recorded = try Recorded(synced ? .synced : .batched(maxDelay: .zero))
        defer { recorded.directory.remove() }
        let command = Self.envelope()
        try await recorded.accept(command)
        try await recorded.start(command)
        recorded.fireTimer(0)  // the start waited long enough: committed alone
        #expect(try await recorded.journal.synchronousSetting() == (synced ? 2 : 1))
        try await recorded.end(command)
        #expect(try await recorded.journal.synchronousSetting() == 2)
        #expect(recorded.commits.map(\.writes) == [1, 1, 1])
        #expect(recorded.commits.map(\.synced) == [true, synced, true])
    }

    /// With a `maxDelay`, even a write that finds the journal idle waits for company: two
    /// accepts made together share one commit.
    @Test func aBatchDelayGathersWritesEvenWhenTheJournalIsIdle() async throws {
        // Long, so the second accept is queued inside the window on a busy machine.
        let recorded = try Recorded(.batched(maxDelay: .milliseconds(500)))
        defer { recorded.directory.remove() }
        async let first: Void = recorded.accept(Self.envelope())
        async let second: Void = recorded.accept(Self.envelope())
        _ = try await (first, second)
        #expect(recorded.commits.map(\.writes) == [2])
    }

    /// A burst of posted commands' write-aheads commits a few thousand at a time, after the
    /// journal's other writes: a write-ahead awaited (a `send`'s) that comes after all of them
    /// is committed in the next commit, not behind the whole burst.
    @Test(.timeLimit(.minutes(1)))
    func postedWriteAheadsCommitAFewThousandAtATimeBehindOtherWrites() async throws {
        // A delay before each commit, so the burst is queued before the first (a test build
        // queues a write-ahead more slowly than SQLite commits one).
        let recorded = try Recorded(.batched(maxDelay: .seconds(1)))
        defer { recorded.directory.remove() }
        let posted = 20_000
        let durable = Atomic<Int>(0)
        let payload = Data(#"{"value":1}"#.utf8)
        for _ in 0..<posted {
            recorded.journal.accept(Self.envelope(), payload: payload) { written in
                if case .success = written { durable.add(1, ordering: .relaxed) }
            }
        }
        let sent = Self.envelope()
        try await recorded.accept(sent)

        let record = try #require(try await recorded.journal.record(sent.id))
        // Behind the whole burst it would be the last row, 20,001.
        #expect(record.sequence < Int64(posted - SQLiteJournal.writeAheadsPerCommit), "sequence \(record.sequence)")
        try await recorded.journal.flush()
        #expect(await waitUntil(.seconds(30)) { durable.load(ordering: .relaxed) == posted })
        let commits = recorded.commits
        #expect(commits.map(\.writes).reduce(0, +) == posted + 2)  // and the flush
        #expect(commits.count >= 3)
        #expect(commits.allSatisfy { $0.writes <= SQLiteJournal.writeAheadsPerCommit + 2 }, "\(commits.map(\.writes))")
    }
}
