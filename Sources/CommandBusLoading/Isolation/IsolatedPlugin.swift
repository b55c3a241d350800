import CommandBusSupport
import CCommandBusABI
import CommandBus
import Dispatch
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import CLinux

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
    private let log: PluginLog
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

    private struct State {
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
    private struct Kill {
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
    private enum KillCause {
        /// The host stops (or was asked to stop the worker).
        case hostStopping
        /// The plugin's file was removed or replaced.
        case replacement
        /// A call cancelled, or past its deadline, that did not end.
        case call(UInt64)
    }

    private let state = Mutex(State())
    private let timesRunAgain = Atomic<Int>(0)

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
    private func quarantining<T>(_ state: inout State, _ update: (inout State) -> T) -> (T, (@Sendable () -> Void)?) {
        let before = state.lifecycle.quarantine
        let result = update(&state)
        return (result, before == nil && state.lifecycle.quarantine != nil ? state.onQuarantine : nil)
    }

    /// Whether the plugin was taken off the bus: no worker starts again.
    package var isRetired: Bool { state.withLock { $0.lifecycle.isRetired } }

    /// Whether a worker is running now.
    package var isRunning: Bool { state.withLock { $0.lifecycle.running != nil } }

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
                let launched = launch()
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

    /// Spawns a worker and waits (at most ``startDeadline``) for it to say what it loaded.
    private func launch() -> Result<(pid_t, RunningWorker), PluginLoadFailure> {
        var sockets: [Int32] = [0, 0]
        // Close-on-exec, so other children never inherit a worker's socket (its EOF must mean it died);
        // the dup2 onto descriptor 3 in the worker's own spawn clears the flag on its end there.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &sockets) == 0 else {
            return .failure(.init("cannot make a socketpair for its worker"))
        }
        // Where a crashing worker names the call that crashed it, close-on-exec for the same
        // reason, and never blocking: a child the plugin started may hold the worker's end.
        var culprit: [Int32] = [0, 0]
        guard pipe2(&culprit, O_CLOEXEC | O_NONBLOCK) == 0 else {
            close(sockets[0]); close(sockets[1])
            return .failure(.init("cannot make a pipe for its worker"))
        }
        guard let pid = ChildProcess.spawn(
            executable, ChildProcessRole.worker(file: path, hash: hash).arguments,
            passing: [(sockets[1], PluginWorker.channelDescriptor), (culprit[1], PluginWorker.culpritDescriptor)],
            closing: [sockets[0], culprit[0]], extraEnvironment: ["SWIFT_BACKTRACE=enable=no"]
        ) else {
            for descriptor in sockets + culprit { close(descriptor) }
            return .failure(.init("cannot start a worker (\(executable))"))
        }
        close(sockets[1])
        close(culprit[1])
        var timeout = timeval(tv_sec: Int(Self.startDeadline.components.seconds), tv_usec: 0)
        setsockopt(sockets[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let channel = FrameChannel(descriptor: sockets[0])
        let first = channel.receive()
        var none = timeval(tv_sec: 0, tv_usec: 0)
        setsockopt(sockets[0], SOL_SOCKET, SO_RCVTIMEO, &none, socklen_t(MemoryLayout<timeval>.size))
        guard let first, first.kind == .ready,
              let description = try? JSONDecoder().decode(PluginDescription.self, from: Data(first.body)) else {
            let reason: String
            if let first, first.kind == .loadFailed {
                reason = String(decoding: first.body, as: UTF8.self)
                _ = ending(of: pid)
            } else {
                // It answered nothing useful within the deadline: make sure it is gone before reaping it.
                kill(pid, SIGKILL)
                reason = "its worker \(ending(of: pid)) while loading"
            }
            channel.close()
            close(culprit[0])
            return .failure(.init(reason))
        }
        guard let reader = WorkerReader(channel: channel) else {
            kill(pid, SIGKILL)
            _ = ending(of: pid)
            channel.close()
            close(culprit[0])
            return .failure(.init("cannot make a pipe to watch its worker"))
        }
        return .success((pid, RunningWorker(pid: pid, reader: reader, description: description, culprit: culprit[0])))
    }

    /// The call whose plugin code crashed `worker`, which has died, if it named one; closes
    /// the pipe it would have named it on.
    private func culprit(of worker: RunningWorker) -> UInt64? {
        defer { close(worker.culprit) }
        var id: UInt64 = 0
        // The worker has been reaped, so what it wrote is there; the pipe does not block.
        let got = read(worker.culprit, &id, MemoryLayout<UInt64>.size)
        return got == MemoryLayout<UInt64>.size && id != 0 ? id : nil
    }

    /// How a worker process ended, for messages: "crashed with SIGSEGV", "exited with status 1".
    private func ending(of pid: pid_t) -> String {
        var status: Int32 = 0
        guard waitpid(pid, &status, 0) == pid else { return "ended" }
        let signal = status & 0x7F
        return signal == 0 ? "exited with status \((status >> 8) & 0xFF)" : "crashed with \(ChildProcess.signalName(signal))"
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
            switch worker.channel.receiveNow(ifFree: true) {
            case .frame(let frame):
                handle(frame, from: worker)
                continue
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
                let grace = counted(Int(Self.cancelGrace.components.seconds), "second")
                killWorker(pending.pid, because: "its worker was stopped: a cancelled command did not end within \(grace)", for: .call(id))
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
    private func stopIfIdle() {
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

    // MARK: Reading

    /// The watcher thread of one worker (see ``WorkerReader``), until the worker ends.
    private func watch(_ worker: RunningWorker) {
        worker.reader.watch(callsOut: { state.withLock { !$0.pending.isEmpty } }) { frame in handle(frame, from: worker) }
        workerDied(worker)
    }

    /// One frame from a worker, on whichever thread read it: answers, subcommands, events and logs.
    private func handle(_ frame: WorkerFrame, from worker: RunningWorker) {
        let channel = worker.channel
        switch frame.kind {
        case .complete, .canHandleAnswer:
            let (call, retired) = state.withLock { state in (state.pending.removeValue(forKey: frame.id), state.stopsWhenIdle) }
            call?.answer(frame.status, frame.body)
            if retired { stopIfIdle() }
        case .send:
            forward(frame, channel: channel)
        case .envelope:
            let envelope = state.withLock { $0.pending[frame.parent]?.context?.envelope }
            if let envelope, let json = try? JSONEncoder().encode(envelope) {
                channel.send(.reply, id: frame.id, status: Int32(CMDBUS_OK.rawValue), body: json)
            } else {
                channel.send(.reply, id: frame.id, status: Int32(CMDBUS_FAILED.rawValue), body: "envelope: unknown or completed call".utf8)
            }
        case .emit:
            state.withLock { $0.pending[frame.id]?.context }?.emit(frame.name, payload: Data(frame.body))
        case .progress:
            let numbers = String(decoding: frame.body, as: UTF8.self).split(separator: " ").compactMap { Int($0) }
            if numbers.count == 2 { state.withLock { $0.pending[frame.id]?.context }?.progress(done: numbers[0], total: numbers[1]) }
        case .log:
            let level = LogLevel.allCases.indices.contains(Int(frame.status)) ? LogLevel.allCases[Int(frame.status)] : .info
            let message = String(decoding: frame.body, as: UTF8.self)
            if let context = state.withLock({ $0.pending[frame.id]?.context }) {
                context.log(level, message)
            } else {
                log(level, message)
            }
        default:
            break
        }
    }

    private func forward(_ frame: WorkerFrame, channel: FrameChannel) {
        guard let context = state.withLock({ $0.pending[frame.parent]?.context }) else {
            channel.send(WorkerFrame(kind: .reply, id: frame.id, status: Int32(CMDBUS_FAILED.rawValue), body: Array("send: unknown parent call".utf8)))
            return
        }
        let name = frame.name, payload = Data(frame.body), id = frame.id
        Task {
            do throws(CommandBusError) {
                let result = try await context.send(name: name, payload: payload)
                channel.send(WorkerFrame(kind: .reply, id: id, status: Int32(CMDBUS_OK.rawValue), body: Array(result)))
            } catch {
                channel.send(WorkerFrame(kind: .reply, id: id, status: ABIStatus.status(for: error), body: Array(error.message.utf8)))
            }
        }
    }

    /// Fails every call in flight with the way the worker ended, and counts the crash. The calls
    /// that did nothing to end it (the host stopped it for another call, or another call's
    /// code crashed it) fail as ones that may run again (``stoppedForAnotherStatus``).
    private func workerDied(_ worker: RunningWorker) {
        let pid = worker.pid
        let how = ending(of: pid)
        let culprit = culprit(of: worker)
        let now = ContinuousClock.now
        let ((orphans, end, kill), quarantined) = state.withLock { state in
            quarantining(&state) { state -> ([UInt64: Pending], WorkerLifecycle<RunningWorker>.Ending, Kill?) in
                let orphans = state.pending.filter { $0.value.pid == pid }
                for id in orphans.keys { state.pending[id] = nil }
                return (orphans, state.lifecycle.ended(pid: pid, now: now, how: how), state.kills.removeValue(forKey: pid))
            }
        }
        var toRunAgain = 0
        for (id, call) in orphans {
            if !call.reachedWorker {
                toRunAgain += 1
                call.answer(Self.stoppedForAnotherStatus, Array("its worker is gone".utf8))
                continue
            }
            switch end {
            case .killedOnPurpose:
                let reason = kill?.reason ?? "its worker was stopped by the host"
                let runsAgain = kill?.mayRunAgain(id) == true
                if runsAgain { toRunAgain += 1 }
                call.answer(runsAgain ? Self.stoppedForAnotherStatus : Self.crashedStatus, Array(reason.utf8))
            case .crashed:
                if let culprit, culprit != id {
                    toRunAgain += 1
                    call.answer(Self.stoppedForAnotherStatus, Array("its worker \(how) while running another command".utf8))
                } else {
                    call.answer(Self.crashedStatus, Array("its worker \(how)".utf8))
                }
            }
        }
        if case .crashed(let quarantine) = end {
            let again = toRunAgain > 0 ? ", \(toRunAgain) of them as ones to run again" : ""
            log(.warning, "worker \(pid) for \(FileSystem.lastComponent(path)) \(how); \(counted(orphans.count, "call")) in flight failed\(again)")
            if let quarantine { log(.warning, "\(FileSystem.lastComponent(path)) \(quarantine)") }
        }
        quarantined?()
    }
}
