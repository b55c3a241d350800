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
    package static let crashLimit = 3
    package static let crashWindow: Duration = .seconds(60)
    package static let startDeadline: Duration = .seconds(10)
    /// How long a cancelled call may take to finish before its worker is killed.
    package static let cancelGrace: Duration = .seconds(1)

    /// The status a call ends with when its worker died (not an ABI value).
    package static let crashedStatus: Int32 = -1_000

    private struct State {
        package var channel: FrameChannel?
        package var pid: pid_t = 0
        /// Whether the running worker's plugin has a `cancel()`; if not, cancelling kills the worker.
        package var cancellable = true
        package var nextID: UInt64 = 1
        package var pending: [UInt64: Pending] = [:]
        package var crashes: [ContinuousClock.Instant] = []
        /// Workers started so far; every one after the first is a restart.
        package var starts = 0
        /// Workers the host killed itself (a deadline), whose end is not a crash.
        package var killed: Set<pid_t> = []
        package var quarantine: String?
        /// What the running worker loaded.
        package var description: WorkerDescription?
    }

    /// A call waiting for a worker, and the command it belongs to (for its subcommands and events).
    package struct Pending: Sendable {
        package let pid: pid_t
        package let context: CommandContext?
        package let answer: @Sendable (Int32, [UInt8]) -> Void
    }

    private let state = Mutex(State())
    private let starting = Mutex(())

    package init(path: String, executable: String, log: PluginLog) {
        self.log = log
        self.path = path
        self.executable = executable
    }

    /// The reason the plugin is quarantined, if it is.
    package var quarantine: String? { state.withLock { $0.quarantine } }

    // MARK: Starting

    /// Starts a worker (if none runs) and returns what it loaded.
    @discardableResult
    package func start() throws(PluginLoadFailure) -> WorkerDescription {
        var result: Result<WorkerDescription, PluginLoadFailure> = .failure(.init("not started"))
        starting.withLock { _ in result = startLocked() }
        return try result.get()
    }

    private func startLocked() -> Result<WorkerDescription, PluginLoadFailure> {
        if let reason = quarantine { return .failure(.init(reason)) }
        if let running = state.withLock({ $0.channel == nil ? nil : $0.description }) { return .success(running) }
        var sockets: [Int32] = [0, 0]
        // Close-on-exec, so other children never inherit a worker's socket (its EOF must mean it died);
        // the dup2 onto descriptor 3 in the worker's own spawn clears the flag on its end there.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &sockets) == 0 else {
            return .failure(.init("cannot make a socketpair for its worker"))
        }
        guard let pid = ChildProcess.spawn(
            executable, ChildProcessRole.worker(file: path).arguments, passing: sockets[1], as: PluginWorker.channelDescriptor,
            closing: sockets[0], extraEnvironment: ["SWIFT_BACKTRACE=enable=no"]
        ) else {
            close(sockets[0]); close(sockets[1])
            return .failure(.init("cannot start a worker (\(executable))"))
        }
        close(sockets[1])
        var timeout = timeval(tv_sec: Int(Self.startDeadline.components.seconds), tv_usec: 0)
        setsockopt(sockets[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let channel = FrameChannel(descriptor: sockets[0])
        let first = channel.receive()
        var none = timeval(tv_sec: 0, tv_usec: 0)
        setsockopt(sockets[0], SOL_SOCKET, SO_RCVTIMEO, &none, socklen_t(MemoryLayout<timeval>.size))
        guard let first, first.kind == .ready,
              let description = try? JSONDecoder().decode(WorkerDescription.self, from: Data(first.body)) else {
            let reason: String
            if let first, first.kind == .loadFailed {
                reason = String(decoding: first.body, as: UTF8.self)
                _ = ending(of: pid)
            } else {
                // It answered nothing useful within the deadline: make sure it is gone before reaping it.
                if first != nil || waitpid(pid, nil, WNOHANG) == 0 { kill(pid, SIGKILL) }
                reason = "its worker \(ending(of: pid)) while loading"
            }
            channel.close()
            return .failure(.init(reason))
        }
        state.withLock { state in
            state.channel = channel
            state.pid = pid
            state.cancellable = description.cancellable
            state.description = description
            state.starts += 1
        }
        let restart = restarts > 0
        log(restart ? .warning : .debug, "worker \(pid) for \(FileSystem.lastComponent(path)) \(restart ? "restarted (restart \(restarts))" : "started")")
        DetachedThread.start { [self] in self.read(channel, pid: pid) }
        return .success(description)
    }

    /// How a worker process ended, for messages: "crashed with SIGSEGV", "exited with status 1".
    private func ending(of pid: pid_t) -> String {
        var status: Int32 = 0
        guard waitpid(pid, &status, 0) == pid else { return "ended" }
        let signal = status & 0x7F
        return signal == 0 ? "exited with status \((status >> 8) & 0xFF)" : "crashed with \(ChildProcess.signalName(signal))"
    }

    // MARK: Calling

    /// Whether a worker is running now.
    package var isRunning: Bool { state.withLock { $0.channel != nil } }

    /// How many times a worker was started again after the first (after a crash, a timeout or a stop).
    package var restarts: Int { state.withLock { max(0, $0.starts - 1) } }

    /// Starts a worker if none runs, after the crash backoff, without holding a cooperative
    /// thread: the wait is a task sleep and the start runs on a thread of its own.
    /// - Returns: Why it could not start (for example, quarantine), or `nil` once it runs.
    package func ensureRunning() async -> PluginLoadFailure? {
        if isRunning { return nil }
        let wait = backoffRemaining()
        if wait > .zero { try? await Task.sleep(for: wait) }
        return await withCheckedContinuation { continuation in
            DetachedThread.start { [self] in
                do throws(PluginLoadFailure) {
                    try start()
                    continuation.resume(returning: nil)
                } catch {
                    continuation.resume(returning: error)
                }
            }
        }
    }

    /// Sends a call to the running worker; `answer` gets the status and body (at once, with
    /// `crashedStatus`, if no worker runs: callers start one with ``ensureRunning()`` first).
    /// - Returns: The call's id, to cancel it.
    package func call(_ kind: WorkerFrame.Kind, index: UInt32, payload: [UInt8], context: CommandContext?,
              answer: @escaping @Sendable (Int32, [UInt8]) -> Void) -> UInt64 {
        let (id, channel) = state.withLock { state -> (UInt64, FrameChannel?) in
            let id = state.nextID
            state.nextID += 1
            state.pending[id] = Pending(pid: state.pid, context: context, answer: answer)
            return (id, state.channel)
        }
        let envelope = context.flatMap { try? JSONEncoder().encode($0.envelope) }.map { String(decoding: $0, as: UTF8.self) } ?? ""
        if channel?.send(WorkerFrame(kind: kind, id: id, status: Int32(bitPattern: index), name: envelope, body: payload)) != true {
            state.withLock { $0.pending.removeValue(forKey: id) }?.answer(Self.crashedStatus, Array("its worker is gone".utf8))
        }
        return id
    }

    /// Asks the worker to cancel call `id`. A plugin with no `cancel()` has its worker killed now;
    /// otherwise the worker is killed if the call is still running after a grace period.
    package func cancel(_ id: UInt64) {
        let (channel, pending, cancellable) = state.withLock { ($0.channel, $0.pending[id], $0.cancellable) }
        guard let pending else { return }
        guard cancellable else { return killWorker(pending.pid) }
        channel?.send(WorkerFrame(kind: .cancel, id: id))
        // A timer, not a thread asleep: the grace period spends nothing while it runs.
        Task { [self] in
            try? await Task.sleep(for: Self.cancelGrace)
            if state.withLock({ $0.pending[id] != nil }) { killWorker(pending.pid) }
        }
    }

    /// Stops the worker, if one runs: calls in flight fail, and a later call starts another.
    public func stop() {
        let pid = state.withLock { $0.channel == nil ? nil : $0.pid }
        if let pid { killWorker(pid) }
    }

    /// Kills a worker on purpose; new calls start another at once, and it does not count as a crash.
    private func killWorker(_ pid: pid_t) {
        state.withLock { state in
            state.killed.insert(pid)
            if state.pid == pid { state.channel = nil }
        }
        kill(pid, SIGKILL)
    }

    /// How long to wait before starting a worker again: a backoff that doubles with each recent crash.
    private func backoffRemaining() -> Duration {
        let (crashes, last) = state.withLock { ($0.crashes.count, $0.crashes.last) }
        guard crashes > 0, let last else { return .zero }
        let backoff = min(Duration.milliseconds(100) * (1 << min(crashes - 1, 6)), .seconds(5))
        return max(.zero, last + backoff - ContinuousClock.now)
    }

    // MARK: Reading

    /// The reader thread of one worker: answers, subcommands, events and logs, until the worker ends.
    private func read(_ channel: FrameChannel, pid: pid_t) {
        while let frame = channel.receive() {
            switch frame.kind {
            case .complete, .canHandleAnswer:
                state.withLock { $0.pending.removeValue(forKey: frame.id) }?.answer(frame.status, frame.body)
            case .send:
                forward(frame, channel: channel)
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
        channel.close()
        workerDied(pid: pid)
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

    /// Fails every call in flight with the way the worker ended, and counts the crash.
    private func workerDied(pid: pid_t) {
        let how = ending(of: pid)
        let now = ContinuousClock.now
        let (orphans, killed) = state.withLock { state -> ([Pending], Bool) in
            let orphans = state.pending.filter { $0.value.pid == pid }
            for id in orphans.keys { state.pending[id] = nil }
            if state.pid == pid { state.channel = nil }
            let killed = state.killed.remove(pid) != nil
            if !killed {
                state.crashes = state.crashes.filter { now - $0 < Self.crashWindow } + [now]
                if state.crashes.count >= Self.crashLimit {
                    state.quarantine = "quarantined: its worker crashed \(state.crashes.count) times within \(Self.crashWindow) (last: \(how))"
                }
            }
            return (Array(orphans.values), killed)
        }
        let reason = killed ? "its worker was killed: a handler ran past its deadline" : "its worker \(how)"
        for call in orphans { call.answer(Self.crashedStatus, Array(reason.utf8)) }
        if !killed {
            log(.warning, "worker \(pid) for \(FileSystem.lastComponent(path)) \(how); \(orphans.count) call(s) in flight failed")
            if let quarantine { log(.warning, "\(FileSystem.lastComponent(path)) \(quarantine)") }
        }
    }
}
