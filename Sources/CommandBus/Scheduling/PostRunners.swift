#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Runs posted root commands on a few runner tasks instead of starting a task for each.
///
/// Starting a task costs more than running a quick command, so a burst of posts is taken from
/// one first-in, first-out queue by a small number of runner tasks, each running one command at
/// a time. The pool grows when commands wait: while any command is queued behind busy runners,
/// a supervisor looks once a millisecond, and if a command queued before its last look is still
/// waiting (every runner is held by a handler that suspended, a journal write or a concurrency
/// slot) and every runner it started has begun, it doubles the runners, never past the number of
/// commands waiting. A burst of slow commands therefore gets a runner each within a
/// few milliseconds, as it would with a task each.
///
/// With a journal that queues write-aheads (``Journal/queuesWriteAheads``, the SQLite one), a
/// posted command is submitted only once its write-ahead is durable, and runners never wait for
/// the journal: a runner suspended in each write-ahead cost every command a suspension and a
/// resumption through the global executor (49,201 instructions a journaled post against 51,690).
///
/// With other journals, runners that wait for the journal's write-ahead are the exception (an
/// ending is handed to the journal, which ends the command once it is durable, while the runner
/// moves on). While at least
/// half the runners wait for a journal write, the pool grows only to ``journalBoundRunners``:
/// more of them would only make each group commit bigger, and a burst of 20,000 journaled posts
/// grew it to thousands of suspended tasks (151 MB resident, against 42 MB and the same
/// throughput at 1,024). Runners held by handlers still grow the pool without that limit.
///
/// When the queue is empty, up to ``baseRunners`` runners park: suspended on a continuation,
/// holding no thread, until a post wakes one. Waking a parked runner costs a job on the global
/// executor, where starting a runner costs a task's allocation and ending one its release, which
/// under a steady stream of posts contended with the posting thread for the allocator's lock.
/// Runners beyond that number end. The bus's `deinit` ends the parked ones.
///
/// Cancellation still reaches a handler as task cancellation: cancelling a command cancels the
/// runner's task while that command runs on it, and a runner whose task was cancelled retires
/// after that command (cancellation cannot be taken back), handing the queue to a new runner.
final class PostRunners: Sendable {
    private struct State {
        var queue: [CommandContext] = []
        /// The index in `queue` of the next command to take; the taken ones are dropped in bulk.
        var head = 0
        /// Commands taken from the queue since it was created, and the ones queued.
        var taken = 0
        var queued = 0
        var runners = 0
        var supervising = false
        /// `queued` at the supervisor's last look: a command below it has waited at least a tick.
        var queuedAtLastLook = 0
        /// Runners waiting for work (counted in `runners`); resumed with `true` for work, `false` to end.
        var parked: [UnsafeContinuation<Bool, Never>] = []
        /// The bus is gone: no runner parks again.
        var shutDown = false

        var waiting: Int { queue.count - head }

        mutating func take() -> CommandContext? {
            guard head < queue.count else { return nil }
            let next = queue[head]
            head += 1
            taken += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: queue.capacity <= 4_096)
                head = 0
            } else if head >= 1_024 && head * 2 >= queue.count {
                queue.removeFirst(head)
                head = 0
            }
            return next
        }
    }

    /// Runners started at once when commands arrive and none is free: one per core the process
    /// may use, at least two. Asking costs a read of the cgroup's CPU quota, so it is asked only
    /// once two runners are busy (a one-shot `cmdbus run` never gets that far).
    static let baseRunners = max(2, ProcessInfo.processInfo.activeProcessorCount)
    /// How often the supervisor looks for commands held up behind busy runners.
    static let supervisionTick: Duration = .milliseconds(1)
    /// The most runners the pool grows to while at least half of them wait for the journal.
    static let journalBoundRunners = 1_024
    private let state = Mutex(State())
    /// Runners waiting for a journal write: the write-ahead (a runner hands an ending to the journal and moves on).
    private let journalWaits = Atomic<Int>(0)
    /// Runners started whose task has not yet asked for its first command.
    fileprivate let startingRunners = Atomic<Int>(0)

    init() {}

    /// Queues a routed command to run on a runner.
    func submit(_ context: CommandContext) {
        let (wake, startRunner, startSupervisor) = state.withLock { state -> (UnsafeContinuation<Bool, Never>?, Bool, Bool) in
            state.queue.append(context)
            state.queued += 1
            if let parked = state.parked.popLast() { return (parked, false, false) }
            let runner = state.runners < 2 || state.runners < Self.baseRunners
            if runner { state.runners += 1 }
            // A command that gets a runner of its own needs no watching; one that queues behind busy runners does.
            let supervisor = !runner && !state.supervising
            if supervisor {
                state.supervising = true
                state.queuedAtLastLook = state.queued
            }
            return (nil, runner, supervisor)
        }
        wake?.resume(returning: true)
        if startRunner { PostRunner.start(in: self) }
        if startSupervisor { Task.detached { await self.supervise() } }
    }

    /// A runner starts (`true`) or stops waiting for the journal.
    func runnerWaitsForJournal(_ waits: Bool) {
        journalWaits.add(waits ? 1 : -1, ordering: .relaxed)
    }

    /// Runners alive, and how many of them are parked (for tests).
    var runnerCounts: (alive: Int, parked: Int) { state.withLock { ($0.runners, $0.parked.count) } }

    /// Ends the parked runners, and stops runners from parking: the bus is gone.
    func shutDown() {
        let parked = state.withLock { state in
            state.shutDown = true
            defer { state.parked = [] }
            return state.parked
        }
        for runner in parked { runner.resume(returning: false) }
    }

    /// The next command for a runner, waiting parked for one if the runner is among the first
    /// ``baseRunners``; `nil` (and the runner counted out) when it should end.
    fileprivate func next() async -> CommandContext? {
        while true {
            let (next, park) = state.withLock { state -> (CommandContext?, Bool) in
                if let next = state.take() { return (next, false) }
                if !state.shutDown, state.runners <= 2 || state.runners <= Self.baseRunners { return (nil, true) }
                state.runners -= 1
                return (nil, false)
            }
            if let next { return next }
            guard park else { return nil }
            let hasWork = await withUnsafeContinuation { (continuation: UnsafeContinuation<Bool, Never>) in
                let now = state.withLock { state -> Bool? in
                    if state.waiting > 0 { return true }
                    if state.shutDown { return false }
                    state.parked.append(continuation)
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
            if !hasWork {
                state.withLock { $0.runners -= 1 }
                return nil
            }
        }
    }

    /// A runner retiring early (its task was cancelled): start another if commands still wait.
    fileprivate func retire() {
        let replace = state.withLock { state -> Bool in
            if state.waiting > 0 { return true }
            state.runners -= 1
            return false
        }
        if replace { PostRunner.start(in: self) }
    }

    private func supervise() async {
        while true {
            try? await Task.sleep(for: Self.supervisionTick)
            let added = state.withLock { state -> Int? in
                guard state.waiting > 0 else {
                    state.supervising = false
                    return nil
                }
                let heldUp = state.taken < state.queuedAtLastLook
                state.queuedAtLastLook = state.queued
                // Runners that have not started yet are not held up: they have had no chance. On a
                // loaded machine their tasks can wait many ticks for a thread, and counting them
                // busy doubled the pool each tick, past the journal's limit (2,048 runners for
                // 2,048 posts held in the write-ahead, where the limit is 1,024).
                guard heldUp, startingRunners.load(ordering: .relaxed) == 0 else { return 0 }
                let journalBound = journalWaits.load(ordering: .relaxed) * 2 >= state.runners
                let room = journalBound ? max(0, Self.journalBoundRunners - state.runners) : Int.max
                let added = min(state.waiting, max(1, state.runners), room)
                state.runners += added
                return added
            }
            guard let added else { return }
            for _ in 0..<added { PostRunner.start(in: self) }
        }
    }
}

/// One runner task of ``PostRunners``, and the command it is running, so that a cancellation
/// meant for that command reaches this task and no other command's.
final class PostRunner: Sendable {
    private struct State {
        var task: Task<Void, Never>?
        var current: CommandContext?
        /// The command running was cancelled: this runner's task is (or is about to be), so it retires.
        var cancelled = false
        /// A cancellation that came before the task was stored.
        var cancelWhenStored = false
    }

    private let state = Mutex(State())

    fileprivate static func start(in pool: PostRunners) {
        pool.startingRunners.add(1, ordering: .relaxed)
        let runner = PostRunner()
        let task = Task.detached { await runner.run(pool) }
        let cancel = runner.state.withLock { state -> Bool in
            state.task = task
            return state.cancelWhenStored
        }
        if cancel { task.cancel() }
    }

    /// Commands a runner runs before it lets the other jobs of the global executor have its thread.
    static let commandsPerTurn = 128

    private func run(_ pool: PostRunners) async {
        pool.startingRunners.subtract(1, ordering: .relaxed)
        var ranThisTurn = 0
        while let context = await pool.next() {
            state.withLock { $0.current = context }
            context.attach(runner: self)
            _ = await context.run()
            let cancelled = state.withLock { state -> Bool in
                state.current = nil
                return state.cancelled
            }
            if cancelled { return pool.retire() }
            // Taking the next command suspends only when the queue is empty, and a quick command
            // never does: under a steady flood the runners held every thread of the global
            // executor, and every other task (a subcommand, a server's reply with events, a
            // heartbeat) waited seconds for the flood to end.
            ranThisTurn += 1
            if ranThisTurn == Self.commandsPerTurn {
                ranThisTurn = 0
                await Task.yield()
            }
        }
    }

    /// Cancels this runner's task if it is running `context`; a runner cancelled so retires after it.
    ///
    /// The decision is made under the runner's lock, where the runner also moves to its next
    /// command, so a cancellation never reaches the command after the one it was meant for. The
    /// task itself is cancelled outside the lock: its cancellation handlers are the handler's code.
    func cancel(ifRunning context: CommandContext) {
        let task = state.withLock { state -> Task<Void, Never>? in
            guard state.current === context else { return nil }
            state.cancelled = true
            if state.task == nil { state.cancelWhenStored = true }
            return state.task
        }
        task?.cancel()
    }
}
