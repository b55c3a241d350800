import CommandBusSupport
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Puts a host's remote subcommands on the shared bus, and cancels them there, from a thread and
/// a connection of its own: every subcommand waiting is inserted in one statement.
///
/// A handler's `send` used to insert its subcommand on the thread it ran on, one of the few of
/// Swift's cooperative pool (two on a two-core machine), which then waited for PostgreSQL to
/// commit: with 64 `greet-all`s running, each subcommand's parent waited 45 ms to hear its result
/// and send the next, queued behind other commits. Here a burst costs one commit, and no handler
/// waits on a thread of the pool.
///
/// That statement (``BusSQL/submitSubcommands``) wakes the hosts of each name once, unless its
/// commands wait as a backlog.
package final class SubcommandPoster: Sendable {
    /// What the poster is given to do: a subcommand to insert, with whom to tell, or a command to cancel.
    enum Work: Sendable {
        case submit(BusSubmission, Callback<PGError?>)
        case cancel(UUID)
    }

    private struct State {
        var queue: [Work] = []
        var stopped = false
    }

    /// The most subcommands and cancels one batch takes; the rest wait for the next.
    static let batchLimit = 256

    private let state = Mutex(State())
    private let wake = WakeSignal()
    private let url: String
    /// How long a batch is tried again while PostgreSQL is out of reach, before each of its
    /// subcommands fails as unable to reach the bus.
    private let retryWindow: Duration

    /// Starts the poster's thread for the bus at `url`; it connects when first given work.
    package init(url: String, retryingFor retryWindow: Duration = .seconds(30)) {
        self.url = url
        self.retryWindow = retryWindow
        DetachedThread.start(named: "bus-subcommands") { [self] in self.loop() }
    }

    /// Inserts `submission` on the bus, then calls `done` (on the poster's thread) with `nil`, or
    /// with why it could not.
    package func submit(_ submission: BusSubmission, then done: @escaping @Sendable (PGError?) -> Void) {
        enqueue(.submit(submission, Callback(done)))
    }

    /// Asks the bus to cancel command `id` (best effort: a bus out of reach leaves it to run).
    package func cancel(_ id: UUID) {
        enqueue(.cancel(id))
    }

    /// Stops the thread once what is queued is done.
    package func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
    }

    private func enqueue(_ work: Work) {
        state.withLock { $0.queue.append(work) }
        wake.signal()
    }

    private func loop() {
        let session = PGSession(url: url, planning: .once)
        while true {
            let (batch, stopped) = state.withLock { state -> ([Work], Bool) in
                let taken = Array(state.queue.prefix(Self.batchLimit))
                state.queue.removeFirst(taken.count)
                return (taken, state.stopped)
            }
            if batch.isEmpty {
                if stopped { return }
                wake.wait(upTo: .seconds(1))
                wake.clear()
                continue
            }
            run(batch, on: session)
        }
    }

    /// Runs `batch`: its subcommands in one statement (``BusSubmission/submitSubcommands(_:on:)``),
    /// then its cancels in one more, which locks its rows in id order. Neither needs a transaction
    /// around them (a `BEGIN` and a `COMMIT` were two of every three round trips the poster made):
    /// an insert made twice is made once, by its id, and a cancel made twice flags the same rows.
    /// So the batch is run again while PostgreSQL is out of reach for up to ``retryWindow`` (a
    /// restart takes seconds, and a tree of work need not fail for it); if it fails otherwise,
    /// each on its own, so one bad submission fails alone and each hears its own error.
    func run(_ batch: [Work], on session: PGSession) {
        let deadline = ContinuousClock.now + retryWindow
        let submissions = batch.compactMap { work -> BusSubmission? in if case .submit(let submission, _) = work { submission } else { nil } }
        let cancelled = batch.compactMap { work -> UUID? in if case .cancel(let id) = work { id } else { nil } }
        while true {
            do throws(PGError) {
                try session.run { connection throws(PGError) in
                    try BusSubmission.submitSubcommands(submissions, on: connection)
                    if !cancelled.isEmpty { try connection.execute(BusSQL.cancel, [.uuidArray(cancelled)]) }
                }
                for case .submit(_, let done) in batch { done(nil) }
                return
            } catch where error.isConnectionProblem && ContinuousClock.now < deadline && !state.withLock({ $0.stopped }) {
                session.backOff()
            } catch {
                break
            }
        }
        for work in batch {
            do throws(PGError) {
                try session.run { connection throws(PGError) in try perform(work, on: connection) }
                if case .submit(_, let done) = work { done(nil) }
            } catch {
                if case .submit(_, let done) = work { done(error) }
            }
        }
    }

    private func perform(_ work: Work, on connection: PGConnection) throws(PGError) {
        switch work {
        case .submit(let submission, _): try submission.submit(on: connection)
        case .cancel(let id): try connection.execute(BusSQL.cancel, [.uuidArray([id])])
        }
    }
}
