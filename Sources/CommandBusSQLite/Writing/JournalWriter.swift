import CommandBus
import CommandBusSupport
import Dispatch
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Arms a timer: calls the drain it is given when the wait for company is up. Tests fire them by hand.
package typealias UnwaitedWriteTimer = @Sendable (_ drain: @escaping @Sendable () -> Void) -> Void

/// The SQLite journal's writes: queued, grouped into commits, and committed by whoever finds the
/// journal idle.
///
/// A write somebody waits for, arriving when no commit is under way or due, is committed at once
/// on the caller's thread, with whatever writes nobody waits for are queued: a lone `send` pays no
/// hand-off to another thread and back. Writes that arrive while a commit is under way queue up,
/// and the journal's own queue commits them together once it ends (group commit). Writes nobody
/// waits for (a command starting to run) wait up to ``SQLiteJournal/unwaitedWriteDelay`` for
/// company, usually their command's ending, whose statement they become part of.
final class JournalWriter: @unchecked Sendable {
    // `connection` is used by one thread at a time: the one `state.committing` names, or a read.

    /// The SQLite side: statements, and whether commits sync (`PRAGMA synchronous = FULL`) or leave it to a later one.
    private struct Connection: ~Copyable {
        let statements: SQLiteJournalStatements
        var syncsAtCommit = true
    }

    let durability: SQLiteJournal.Durability
    private let connection: Mutex<Connection>
    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "cmdbus.journal")
    /// Where the queue's commits are told to those waiting for them (see ``drain(timer:)``).
    private let delivery = DispatchQueue(label: "cmdbus.journal.delivery")
    private let owner: String
    /// Sets off the drain for writes nobody waits for, ``SQLiteJournal/unwaitedWriteDelay`` from now.
    private let startLater: UnwaitedWriteTimer?
    private let commitObserver = Mutex<Callback<JournalCommit>?>(nil)
    /// A `.deferred` journal's log, which makes its writes durable ahead of SQLite (see ``JournalLog``).
    private let log: JournalLog?

    /// - Parameters:
    ///   - log: Where writes are made durable before SQLite commits them (without syncing); `nil`, SQLite syncs them.
    ///   - startLater: Arms the timer for writes nobody waits for; `nil`, the journal's queue after ``SQLiteJournal/unwaitedWriteDelay``.
    init(statements: SQLiteJournalStatements, durability: SQLiteJournal.Durability, owner: String, log: JournalLog?, startLater: UnwaitedWriteTimer?) {
        connection = Mutex(Connection(statements: statements))
        self.durability = durability
        self.owner = owner
        self.log = log
        self.startLater = startLater
    }

    /// Called after each commit, before anyone waiting hears of it.
    func observeCommits(_ observer: @escaping @Sendable (JournalCommit) -> Void) {
        commitObserver.withLock { $0 = Callback(observer) }
    }

    /// Queues `operation` (`nil`: a flush, which only waits for the writes before it), and waits
    /// for it to be durable if asked.
    func write(_ operation: JournalWrite?, waitUntilDurable: Bool) async throws(CommandBusError) {
        if let log, let operation {
            let position = try appendToLog(operation, log: log)
            if case .accept = operation {
                // A deferred write-ahead is durable with its command's ending; written, a process that dies keeps it.
                try log.write(through: position)
                return
            }
            if waitUntilDurable { try await log.sync(through: position) }
            return
        }
        if !waitUntilDurable {
            enqueue(PendingWrite(operation: operation, completion: nil))
            return
        }
        if let batch = takeLeadership(with: operation) {
            try commitAndPassOn(batch).get()
            return
        }
        let result: Result<Void, CommandBusError> = await withUnsafeContinuation { continuation in
            // A flush queues behind the posted write-aheads too: it waits for every write before it.
            enqueue(PendingWrite(operation: operation, completion: continuation), isWriteAheadOrFlush: operation == nil)
        }
        try result.get()
    }

    /// Queues a posted command's write-ahead behind the others (see `State.writeAheads`), and
    /// calls `whenDurable` once it is durable.
    func writeAhead(_ command: AcceptedCommand, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        if let log {
            // Written to the log, the write-ahead is as safe as a deferred one gets. The caller hears
            // of it at once, on its own thread, without a hop to the delivery queue; or, while the
            // log syncs for others, from the syncing thread, whose next round writes it with every
            // post's since (``JournalLog/write(through:then:)``).
            do throws(CommandBusError) {
                log.write(through: try appendToLog(.accept(command), log: log), then: whenDurable)
            } catch {
                whenDurable(.failure(error))
            }
            return
        }
        enqueue(PendingWrite(operation: .accept(command), completion: nil, callback: whenDurable), isWriteAheadOrFlush: true)
    }

    /// Queues `operation` to be committed soon, and calls `whenDurable` once it is.
    func write(_ operation: JournalWrite, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        if let log {
            // Told on the thread that synced the log: usually the caller's own, which leads the sync.
            do throws(CommandBusError) {
                let position = try appendToLog(operation, log: log)
                log.sync(through: position, then: whenDurable)
            } catch {
                whenDurable(.failure(error))
            }
            return
        }
        enqueue(PendingWrite(operation: operation, completion: nil, callback: whenDurable))
    }

    /// Runs `body` on the queue, with the connection to itself.
    func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteJournalStatements) throws(CommandBusError) -> T) async throws(CommandBusError) -> T {
        let result: Result<T, CommandBusError> = await withUnsafeContinuation { continuation in
            queue.async {
                // A logged journal's writes reach SQLite after their callers hear of them: what is queued goes first.
                if self.log != nil { self.drain() }
                let result = self.connection.withLock { connection -> Result<T, CommandBusError> in
                    do throws(CommandBusError) { return .success(try body(connection.statements)) } catch { return .failure(error) }
                }
                continuation.resume(returning: result)
            }
        }
        return try result.get()
    }

    // MARK: Leading

    /// The writes a caller commits itself, its own (`operation`) last, if no commit is under way
    /// or due; `nil` otherwise. Only writes nobody waits for can be queued then; they go with it.
    /// A `.batched` journal with a `maxDelay` always waits for company instead.
    private func takeLeadership(with operation: JournalWrite?) -> [PendingWrite]? {
        if case .batched(let delay) = durability, delay > .zero { return nil }
        return state.withLock { state -> [PendingWrite]? in
            guard !state.committing, state.scheduled != .now, state.writeAheads.isEmpty else { return nil }
            state.committing = true
            state.scheduled = .none
            state.queue.append(PendingWrite(operation: operation, completion: nil))
            return state.queue.takeAll()
        }
    }

    /// Commits a leader's batch on its thread, then hands the journal on; returns the outcome of
    /// the leader's own write, the last.
    private func commitAndPassOn(_ batch: [PendingWrite]) -> Result<Void, CommandBusError> {
        let outcomes = commit(batch, waited: batch.indices.map { $0 == batch.count - 1 })
        endCommitting()
        return outcomes[outcomes.count - 1]
    }

    // MARK: Queueing

    private func enqueue(_ write: consuming PendingWrite, isWriteAheadOrFlush: Bool = false) {
        let urgent = write.isWaited
        // Moved into the queue, not copied: a copy retains every reference an ending holds.
        var moving = Optional(write)
        let schedule = state.withLock { state -> Next in
            state.enqueue(moving.take()!, toLane: isWriteAheadOrFlush, urgent: urgent)
        }
        start(schedule)
    }

    /// Appends `operation` to the log and queues it for SQLite, and returns its position in the
    /// log. Both happen under the state's lock, so SQLite takes writes in the log's order, and the
    /// checkpoint queued when the log retires a file follows every write that file holds. SQLite
    /// commits the write within a few milliseconds, without a sync; a read in this process
    /// commits what is queued first.
    private func appendToLog(_ operation: JournalWrite, log: JournalLog) throws(CommandBusError) -> UInt64 {
        let record = JournalLogRecord.encode(operation, owner: owner)
        var moving = Optional(PendingWrite(operation: operation, completion: nil))
        let (position, queued, checkpoint) = try state.withLock { state throws(CommandBusError) -> (UInt64, Next, Next) in
            let (position, retired) = try log.append(record)
            // Not urgent: SQLite's commit waits for company (``SQLiteJournal/unwaitedWriteDelay``),
            // and a sequence of sends shares a commit every few milliseconds, where a commit per
            // ending competed for the cores with the sends behind it (a deferred socket send's p50
            // 185 and 214 µs against 212 and 258, in runs alternated with a server without a journal).
            let queued = state.enqueue(moving.take()!, toLane: false, urgent: false)
            guard let retired else { return (position, queued, .nothing) }
            // A synced commit after every write of the retired file lets the log reuse it.
            let checkpoint = PendingWrite(operation: nil, completion: nil) { outcome in
                if case .success = outcome { log.checkpointed(retired) }
            }
            return (position, queued, state.enqueue(checkpoint, toLane: true, urgent: true))
        }
        start(queued)
        start(checkpoint)
        return position
    }

    private func start(_ next: Next) {
        switch (next, durability) {
        case (.nothing, _):
            return
        case (.armTimer(let wait, let delay), _):
            if let startLater {
                startLater { self.drain(timer: wait) }
            } else {
                queue.asyncAfter(deadline: .now() + Self.dispatchInterval(max(delay, .zero))) { self.drain(timer: wait) }
            }
        case (.drain, .batched(let delay)) where delay > .zero:
            queue.asyncAfter(deadline: .now() + Self.dispatchInterval(delay)) { self.drain() }
        case (.drain, _):
            queue.async { self.drain() }
        }
    }

    private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        .nanoseconds(Int(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000))
    }

    /// The most posted write-aheads one drain commits, after the other writes queued.
    static let writeAheadsPerCommit = 8_192

    /// Commits what is queued, on the queue: all but the posted write-aheads beyond
    /// ``writeAheadsPerCommit``. A drain that finds nothing (an earlier commit took its writes)
    /// commits nothing; so does one that finds a commit under way (its end starts the next
    /// drain), or a timer (`timer`, the wait it was armed for) that finds no wait for company, or
    /// a later one than its own, which it re-arms for.
    private func drain(timer: UInt64? = nil) {
        var next = Next.nothing
        let writes = state.withLock { state -> [PendingWrite] in
            if let timer {
                state.timerArmed = false
                guard state.scheduled == .later else { return [] }
                if state.waits != timer {
                    next = state.armTimer()
                    return []
                }
            }
            guard !state.committing, !state.queue.isEmpty || !state.writeAheads.isEmpty else { return [] }
            state.committing = true
            var writes = state.queue.takeAll()
            if writes.isEmpty, state.writeAheads.count <= Self.writeAheadsPerCommit {
                // The usual case in a burst: the lane is taken whole, its buffer and not a copy of each write.
                swap(&writes, &state.writeAheads)
            } else {
                let writeAheads = min(state.writeAheads.count, Self.writeAheadsPerCommit)
                writes.append(contentsOf: state.writeAheads[..<writeAheads])
                state.writeAheads.removeFirst(writeAheads)
            }
            // The write-aheads left are committed next, as soon as this commit ends.
            state.scheduled = state.writeAheads.isEmpty ? .none : .now
            return writes
        }
        start(next)
        guard !writes.isEmpty else { return }
        let outcomes = commit(writes, waited: writes.map { $0.isWaited })
        endCommitting()
        // Those waiting hear of the commit on another queue, in commit order, and the batch is
        // freed there. In a burst of journaled posts the journal's queue is the one busy thread
        // (1.36 CPUs in use on two), and telling each command (its ending concluded, its
        // write-ahead's command queued on the runners) and freeing its payload, ids and
        // callbacks cost it about 2,600 instructions a command, while the next commit waited.
        delivery.async { Self.deliver(outcomes, to: writes) }
    }

    /// Resumes each write's waiter and calls its callback with its outcome, in order.
    private static func deliver(_ outcomes: [Result<Void, CommandBusError>], to writes: [PendingWrite]) {
        for index in writes.indices {
            writes[index].completion?.resume(returning: outcomes[index])
            writes[index].callback?(outcomes[index])
        }
    }

    /// Ends a commit, and starts the next for what queued meanwhile: at once if somebody waits
    /// for it, else when its wait is up (a timer that fired during the commit did nothing).
    private func endCommitting() {
        let next = state.withLock { state -> Next in
            state.committing = false
            switch state.scheduled {
            case .none:
                return .nothing
            case .now:
                return .drain
            case .later:
                return state.timerArmed ? .nothing : state.armTimer()
            }
        }
        start(next)
    }

    // MARK: Committing

    /// Commits `writes`, one transaction for the lot or one each when `.synced`, and returns
    /// each write's outcome. `waited[i]` says whether somebody waits for `writes[i]`.
    private func commit(_ writes: [PendingWrite], waited: [Bool]) -> [Result<Void, CommandBusError>] {
        if case .synced = durability {
            return writes.indices.map { commitTransaction([writes[$0]], waited: [waited[$0]]) }
        }
        return Array(repeating: commitTransaction(writes, waited: waited), count: writes.count)
    }

    /// One transaction, synced if ``mustSync(_:waited:)`` says so; the observer hears of it.
    private func commitTransaction(_ writes: [PendingWrite], waited: [Bool]) -> Result<Void, CommandBusError> {
        let began = ContinuousClock.now
        let sync = mustSync(writes, waited: waited)
        let outcome = connection.withLock { connection -> Result<Void, CommandBusError> in
            do throws(CommandBusError) {
                if sync != connection.syncsAtCommit {
                    try connection.statements.setSyncAtCommit(sync)
                    connection.syncsAtCommit = sync
                }
                try connection.statements.begin()
                do throws(CommandBusError) {
                    try connection.statements.apply(writes, owner: owner)
                    try connection.statements.commit()
                    return .success(())
                } catch {
                    connection.statements.rollback()
                    throw error
                }
            } catch {
                return .failure(error)
            }
        }
        commitObserver.withLock { $0 }?(JournalCommit(duration: .now - began, writes: writes.count, synced: sync))
        return outcome
    }

    /// Whether committing `writes` must sync: always when `.synced`, else only when somebody
    /// waits for one of them to be durable. Writes nobody waits for (a command starting, an ending
    /// recorded after the fact) become durable with the next commit that syncs; so does a deferred
    /// write-ahead.
    private func mustSync(_ writes: [PendingWrite], waited: [Bool]) -> Bool {
        if case .synced = durability { return true }
        return writes.indices.contains { index in
            guard waited[index] else { return false }
            if case .deferred = durability, case .accept? = writes[index].operation { return false }
            return true
        }
    }
}
