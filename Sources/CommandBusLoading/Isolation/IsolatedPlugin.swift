import CommandBusSupport
import CommandBus
import Dispatch
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

/// A plugin whose handlers run in a worker process (`--isolate`): a crash there fails the
/// commands in flight with `pluginCrashed`, and the host carries on.
///
/// The worker is restarted on the next call, after a backoff that doubles with each crash;
/// a plugin that crashes `crashLimit` times within `crashWindow` is quarantined. Since the
/// worker loads the file anew each time, a replaced `.so` takes effect at the next start.
public final class IsolatedPlugin: Sendable {
    /// The plugin file.
    public let path: String
    /// The `cmdbus` binary that runs `plugins worker FILE`.
    package let executable: String
    /// Where the worker's command-less log lines go.
    let log: PluginLog
    /// The SHA-256 `plugins.lock` lists for the file, which each worker checks on its copy.
    private let hash: String?
    package static let crashLimit = 3
    package static let crashWindow: Duration = .seconds(60)
    package static let startDeadline: Duration = .seconds(10)
    /// How long a cancelled call may take to finish before its worker is killed.
    package static let cancelGrace: Duration = .seconds(1)

    /// How long the reader keeps asking for a frame before it sleeps, while calls are out.
    package static let answerSpin = SpinBudget.duration(default: .microseconds(50))

    /// The status a call ends with when its worker died (not an ABI value).
    package static let crashedStatus: Int32 = -1_000

    /// The status a call ends with when the plugin was taken off the bus (its file removed or
    /// replaced) before the call reached its worker, which is stopping: the call was never made,
    /// so the bus may hand the command to the handler that took the plugin's place (not an ABI value).
    package static let retiredStatus: Int32 = -1_001

    /// The status a call ends with when the host stopped its worker for something else: another
    /// call cancelled (or past its deadline) that did not end, or the plugin's file replaced. The
    /// call did nothing wrong, and may be run again (not an ABI value): its error is retryable,
    /// so a retry policy, or the shared bus, runs it again.
    package static let stoppedForAnotherStatus: Int32 = -1_002

    /// A running worker: the socket to it and what it loaded.
    package struct RunningWorker: Sendable {
        package let pid: pid_t
        package let reader: WorkerReader
        package var channel: FrameChannel { reader.channel }
        package let description: PluginDescription
        /// The pipe on which the worker names the call that crashed it (``PluginWorker/culpritDescriptor``).
        let culprit: Int32
    }

    /// A call waiting for a worker, and the command it belongs to (for its subcommands and events).
    package struct Pending: Sendable {
        package let pid: pid_t
        package let context: CommandContext?
        package let answer: @Sendable (Int32, [UInt8]) -> Void
        /// False once writing the call to the worker failed: the worker was gone, and the call never ran.
        package var reachedWorker = true
    }

    struct State {
        var lifecycle = WorkerLifecycle<RunningWorker>(crashLimit: IsolatedPlugin.crashLimit, crashWindow: IsolatedPlugin.crashWindow)
        var nextID: UInt64 = 1
        var pending: [UInt64: Pending] = [:]
        /// Retired: the worker is stopped once no call is out.
        var stopsWhenIdle = false
        /// Why the host is stopping each worker it kills, for the calls that worker still runs.
        var kills: [pid_t: Kill] = [:]
        /// Told once, when the plugin is quarantined (``whenQuarantined(_:)``).
        var onQuarantine: (@Sendable () -> Void)?
    }

    /// Why the host kills a worker, for the calls it still runs.
    struct Kill {
        /// What the calls hear.
        var reason: String
        /// What the worker was stopped for.
        var cause: KillCause

        /// Whether call `id` was stopped for something not its own doing, and may run again.
        func mayRunAgain(_ id: UInt64) -> Bool {
            switch cause {
            case .hostStopping: false
            case .replacement: true
            case .call(let stopped): stopped != id
            }
        }
    }

    /// What the host stops a worker for.
    enum KillCause {
        /// The host stops (or was asked to stop the worker).
        case hostStopping
        /// The plugin's file was removed or replaced.
        case replacement
        /// A call cancelled, or past its deadline, that did not end.
        case call(UInt64)
    }

    let state = Mutex(State())
    private let timesRunAgain = Atomic<Int>(0)
    /// Whether it has been warned of an event whose payload is not JSON (once per plugin).
    let warnedAboutEventPayloads = Atomic<Bool>(false)

    package init(path: String, executable: String, log: PluginLog, hash: String? = nil) {
        self.log = log
        self.hash = hash
        self.path = path
        self.executable = executable
    }

    /// The reason the plugin is quarantined, if it is.
    package var quarantine: String? { state.withLock { $0.lifecycle.quarantine } }

    /// Calls `handler` when the plugin is quarantined (at once if it is), in place of any
    /// handler given before: a host of the shared bus stops offering its commands then.
    package func whenQuarantined(_ handler: @escaping @Sendable () -> Void) {
        let already = state.withLock { state -> Bool in
            state.onQuarantine = handler
            return state.lifecycle.quarantine != nil
        }
        if already { handler() }
    }

    /// The quarantine handler, if `update` (a change of the lifecycle, in the lock) quarantined the plugin.
    func quarantining<T>(_ state: inout State, _ update: (inout State) -> T) -> (T, (@Sendable () -> Void)?) {
        let before = state.lifecycle.quarantine
        let result = update(&state)
        return (result, before == nil && state.lifecycle.quarantine != nil ? state.onQuarantine : nil)
    }

    /// Where the worker and its calls are, for a diagnosis: "ready (pid 4242); 2 calls out: 2 to
    /// pid 4242 (1 never reached it); 1 start".
    package var diagnosis: String {
        state.withLock { state in
            let worker: String = switch state.lifecycle.state {
            case .idle: "idle"
            case .starting(let waiters): "starting (\(counted(waiters.count, "waiter")))"
            case .ready(let pid, _): "ready (pid \(pid))"
            case .backingOff(let until): "backing off (\((until - .now).spoken) left)"
            case .quarantined: "quarantined"
            }
            let byPID = Dictionary(grouping: state.pending.values, by: \.pid)
                .sorted { $0.key < $1.key }
                .map { pid, calls in
                    let unreached = calls.filter { !$0.reachedWorker }.count
                    return "\(calls.count) to pid \(pid)" + (unreached > 0 ? " (\(unreached) never reached it)" : "")
                }
            let calls = counted(state.pending.count, "call") + " out" + (byPID.isEmpty ? "" : ": " + byPID.joined(separator: ", "))
            return "\(worker); \(calls); \(counted(state.lifecycle.starts, "start"))"
        }
    }

    /// Whether the plugin was taken off the bus: no worker starts again.
    package var isRetired: Bool { state.withLock { $0.lifecycle.isRetired } }

    /// The process id of the worker running now, if one is: what an operator gives `top`, `strace`
    /// or `kill` to look at it.
    package var workerPID: pid_t? { state.withLock { $0.lifecycle.running?.pid } }

    /// Whether a worker is running now.
    package var isRunning: Bool { workerPID != nil }

    /// Calls written to a worker and not answered yet: commands running there and `canHandle`
    /// questions.
    package var callsInProgress: Int { state.withLock { $0.pending.count } }

    /// How many times a worker was started again after the first (after a crash, a timeout or a stop).
    package var restarts: Int { state.withLock { max(0, $0.lifecycle.starts - 1) } }

    /// How many times a command ran again on a new worker after its worker ended for another
    /// command's sake (``IsolatedCommandHandler``).
    package var runsAgain: Int { timesRunAgain.load(ordering: .relaxed) }

    /// Counts one command run again (``runsAgain``).
    package func countRunAgain() { timesRunAgain.add(1, ordering: .relaxed) }

    // MARK: Starting

    /// Starts a worker (if none runs) and returns what it loaded, blocking the calling thread
    /// (the loader's, never a cooperative one) until it is up or has failed.
    @discardableResult
    package func start() throws(PluginLoadFailure) -> PluginDescription {
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<RunningWorker, PluginLoadFailure>?>(nil)
        acquire { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get().description
    }

    /// The running worker, starting one (after the crash backoff) if none runs, without holding a
    /// thread while it waits: the backoff is a timer and the start runs on a thread of its own.
    package func ensureRunning() async -> Result<RunningWorker, PluginLoadFailure> {
        if let running = state.withLock({ $0.lifecycle.running }) { return .success(running.worker) }
        return await withCheckedContinuation { continuation in
            acquire { continuation.resume(returning: $0) }
        }
    }

    /// Asks the lifecycle for a worker and carries out its decision; `waiter` hears the outcome once.
    private func acquire(_ waiter: @escaping WorkerLifecycle<RunningWorker>.Waiter) {
        switch state.withLock({ $0.lifecycle.requestStart(now: .now, waiter: waiter) }) {
        case .use(let worker):
            waiter(.success(worker))
        case .refuse(let failure):
            waiter(.failure(failure))
        case .joined:
            break
        case .waitUntil(let instant):
            // A timer, not a thread asleep.
            Task { [self] in
                try? await Task.sleep(until: instant, clock: .continuous)
                acquire(waiter)
            }
        case .start:
            DetachedThread.start { [self] in
                let launched = WorkerLauncher(executable: executable, file: path, hash: hash).launch()
                let now = ContinuousClock.now
                let (waiters, quarantined) = state.withLock { state in
                    quarantining(&state) { state in
                        switch launched {
                        case .success(let (pid, worker)): state.lifecycle.started(pid: pid, worker: worker)
                        case .failure(let failure): state.lifecycle.startFailed(failure, now: now)
                        }
                    }
                }
                quarantined?()
                let result = launched.map(\.1)
                if case .success(let (pid, worker)) = launched {
                    let restarts = restarts
                    log(restarts > 0 ? .warning : .debug, "worker \(pid) for \(FileSystem.lastComponent(path)) \(restarts > 0 ? "restarted (restart \(restarts))" : "started")")
                    DetachedThread.start { [self] in watch(worker) }
                }
                for other in [waiter] + waiters { other(result) }
            }
        }
    }

    // MARK: Calling

    /// Sends a call to `worker`; `answer` gets the status and body (at once, with `crashedStatus`,
    /// if the worker is gone). Wait for it with ``answer(to:from:)``.
    /// - Returns: The call's id, to cancel it; 0 for a call never made (the plugin retired, its
    ///   worker stopped), which `answer` hears at once with ``retiredStatus``.
    package func call(
        _ kind: WorkerFrame.Kind, on worker: RunningWorker, index: UInt32, payload: Data, context: CommandContext?, answer: CallAnswer
    ) -> UInt64 {
        let id = state.withLock { state -> UInt64? in
            // A retired plugin's worker stops once idle, in this lock: a call that finds it
            // stopped (or stopping) was never made, and the bus can route it again.
            guard !state.lifecycle.isRetired || state.lifecycle.running?.pid == worker.pid else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.pending[id] = Pending(pid: worker.pid, context: context, answer: answer.deliver)
            return id
        }
        guard let id else {
            answer.deliver(Self.retiredStatus, Array("its file was removed or replaced, so its worker is stopping".utf8))
            return 0
        }
        if !worker.channel.send(kind, id: id, status: Int32(bitPattern: index), body: payload) {
            // The worker died (another call crashed it) before this call reached it: it never ran.
            // It ends with the worker's other calls, once the host has seen the worker end (so
            // running it again starts the next worker rather than finding this one again); at
            // once if the host has seen that already, or is stopping the worker.
            let endsNow = state.withLock { state -> Bool in
                guard state.pending[id] != nil else { return false }
                guard state.lifecycle.running?.pid == worker.pid else { return true }
                state.pending[id]?.reachedWorker = false
                return false
            }
            if endsNow { abandon(id, reason: "its worker is gone", status: Self.stoppedForAnotherStatus) }
        }
        return id
    }

    /// Waits for a call's answer: first by reading the worker's frames on this thread for a moment
    /// (``answerSpin``), so a quick answer wakes nobody; then suspended, with the watcher reading.
    package func answer(to answer: CallAnswer, from worker: RunningWorker) async -> CallAnswer.Value {
        let end = ContinuousClock.now + Self.answerSpin
        while true {
            if let value = answer.value { return value }
            // Every frame that has arrived, not only the next: one left in the buffer when this
            // caller goes, having found its answer, is one the watcher never sees.
            let (frames, then) = worker.channel.receiveArrived(ifFree: true)
            for frame in frames { handle(frame, from: worker) }
            if !frames.isEmpty { continue }
            switch then {
            case .nothingYet where ContinuousClock.now < end:
                continue
            case .nothingYet, .busy, .ended:
                break
            }
            worker.reader.needWatcher()
            return await answer.wait()
        }
    }

    /// Gives up on call `id` (it took too long, or could not be sent): it ends now with
    /// `status` and `reason`, and a late answer is dropped.
    package func abandon(_ id: UInt64, reason: String, status: Int32 = crashedStatus) {
        state.withLock { $0.pending.removeValue(forKey: id) }?.answer(status, Array(reason.utf8))
    }

    /// Asks the worker to cancel call `id`. A plugin with no `cancel()` has its worker killed now;
    /// otherwise the worker is killed if the call is still running after a grace period.
    package func cancel(_ id: UInt64) {
        let (worker, pending) = state.withLock { ($0.lifecycle.running?.worker, $0.pending[id]) }
        guard let pending, let worker else { return }
        guard worker.description.cancellable else {
            return killWorker(pending.pid, because: "its worker was stopped to cancel a command: the plugin has no cancel()", for: .call(id))
        }
        worker.channel.send(WorkerFrame(kind: .cancel, id: id))
        // A timer, not a thread asleep: the grace period spends nothing while it runs.
        Task { [self] in
            try? await Task.sleep(for: Self.cancelGrace)
            if state.withLock({ $0.pending[id] != nil }) {
                killWorker(pending.pid, because: "its worker was stopped: a cancelled command did not end within \(Self.cancelGrace.spoken)", for: .call(id))
            }
        }
    }

    /// Takes the plugin out of service (its file was removed or replaced): the running worker
    /// finishes the calls it has, for up to `grace`, and is then stopped; none starts again.
    package func retire(drainingFor grace: Duration) {
        state.withLock { state in
            state.lifecycle.retire()
            state.stopsWhenIdle = true
        }
        stopIfIdle()
        // Whatever is still out then (or a worker that was starting) is stopped at the end.
        Task { [self] in
            try? await Task.sleep(for: grace)
            stop()
        }
    }

    /// Stops a retired plugin's worker if no call is out. Decided in the lock ``call(_:on:index:payload:context:answer:)``
    /// takes, so a call is either made before the worker stops or finds it stopped.
    func stopIfIdle() {
        let idle = state.withLock { state -> pid_t? in
            guard state.stopsWhenIdle, state.pending.isEmpty, let pid = state.lifecycle.running?.pid else { return nil }
            state.lifecycle.killing(pid: pid)
            return pid
        }
        if let idle { kill(idle, SIGKILL) }
    }

    /// Stops the worker, if one runs: calls in flight fail, and a later call starts another.
    public func stop() {
        let (running, retired) = state.withLock { ($0.lifecycle.running?.pid, $0.lifecycle.isRetired) }
        guard let running else { return }
        if retired {
            killWorker(running, because: "its file was removed or replaced, and its worker was stopped before this call ended", for: .replacement)
        } else {
            killWorker(running, because: "its worker was stopped by the host", for: .hostStopping)
        }
    }

    /// Kills a worker on purpose; new calls start another at once, and it does not count as a
    /// crash. The calls it still runs fail with `reason`: as ones that may run again
    /// (``stoppedForAnotherStatus``) unless it was stopped for them or because the host stops.
    private func killWorker(_ pid: pid_t, because reason: String, for cause: KillCause) {
        state.withLock { state in
            state.lifecycle.killing(pid: pid)
            if state.kills[pid] == nil { state.kills[pid] = Kill(reason: reason, cause: cause) }
        }
        kill(pid, SIGKILL)
    }
}
