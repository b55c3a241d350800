import CommandBusSupport
import CCommandBusABI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization
import Dispatch
import CLinux
import CCrashReport
import Glibc

/// The worker side of isolated mode: `cmdbus plugins worker FILE` loads one plugin and serves
/// the host's calls over the socketpair on descriptor 3, so a crash in the plugin ends only
/// this process.
package enum PluginWorker {
    /// The descriptor the host hands the worker its end of the socketpair on.
    package static let channelDescriptor: Int32 = 3
    /// The descriptor the host hands the worker a pipe on, for the id of the call that crashes
    /// it (written by the signal handler; ``IsolatedPlugin`` reads it once the worker died).
    package static let culpritDescriptor: Int32 = 4
    /// The address space a worker may use, so a runaway allocation fails instead of swapping.
    package static let addressSpaceLimit: rlim_t = 4 << 30

    /// Runs the worker; returns only if it cannot start.
    /// - Parameter hash: The SHA-256 `plugins.lock` lists for `file`, checked on the private copy.
    package static func run(file: String, hash: String? = nil) -> Never {
        // Anything the plugin prints goes to stderr: stdout carries nothing the host reads.
        dup2(STDERR_FILENO, STDOUT_FILENO)
        var limit = rlimit(rlim_cur: addressSpaceLimit, rlim_max: addressSpaceLimit)
        setrlimit(Int32(RLIMIT_AS.rawValue), &limit)
        let channel = FrameChannel(descriptor: channelDescriptor)
        WorkerSession.channel.withLock { $0 = channel }
        cmdbus_worker_crash_install(culpritDescriptor)
        exitWithHost()
        let plugin: LoadedPlugin
        // From a private copy: the file may be written over while the worker finishes its calls.
        switch PluginLoader.load(file: file, hostTable: WorkerHostTable.pointer, log: .standardError(), privateCopy: true, hash: hash) {
        case .success(let loaded): plugin = loaded
        case .failure(let error):
            channel.send(WorkerFrame(kind: .loadFailed, body: Array(error.reason.utf8)))
            _exit(0)
        }
        WorkerSession.pluginLabel.withLock { $0 = "'\(quotedLine(plugin.name))' (\(FileSystem.lastComponent(file)))" }
        channel.send(WorkerFrame(kind: .ready, body: Array(PluginDescription(plugin).json.utf8)))
        let entry = PluginEntryPoints(
            descriptor: plugin.descriptor!.raw.pointee, state: plugin.state.pointer, handleDecides: plugin.descriptor!.handleDecides
        )
        let threads = WorkerThreads(channel: channel) { frame in job(for: frame, entry: entry) }
        WorkerSession.threads.withLock { $0 = threads }
        threads.serve()
    }

    /// What a frame from the host asks for: plugin code to run (on a thread that has handed the
    /// reading on), or `nil` when the reader has dealt with it itself.
    private static func job(for frame: WorkerFrame, entry: PluginEntryPoints) -> (@Sendable () -> Void)? {
        switch frame.kind {
        case .handle:
            let call = WorkerCall(id: frame.id, payload: WorkerPayload(frame.body))
            WorkerSession.register(call)
            let index = UInt32(bitPattern: frame.status), id = frame.id
            return { running(id) { entry.decideAndHandle(index: index, call: call) } }
        case .canHandle:
            let payload = WorkerPayload(frame.body), index = UInt32(bitPattern: frame.status), id = frame.id
            return {
                let (answer, message) = running(id) { entry.canHandle(index: index, payload: payload) }
                WorkerSession.send(.canHandleAnswer, id: id, status: answer, body: message)
            }
        case .cancel:
            guard let call = WorkerSession.call(withID: frame.id) else { return nil }
            call.cancelled.store(true, ordering: .releasing)
            guard entry.descriptor.cancel != nil else { return nil }
            return { entry.cancel(call) }
        case .reply:
            guard let reply = WorkerSession.takeReply(frame.id) else { return nil }
            let status = frame.status, body = frame.body
            return { reply(status, body) }
        default:
            return nil
        }
    }

    /// Runs `body`, the plugin's code for call `id`, marked as such on this thread: a crash in
    /// it names the call to the host.
    private static func running<T>(_ id: UInt64, _ body: () -> T) -> T {
        cmdbus_worker_crash_enter_call(id)
        defer { cmdbus_worker_crash_leave_call() }
        return body()
    }
}

/// The worker's threads, leader and followers: one of them reads the host's frames at a time,
/// and when a frame asks for plugin code, that thread runs the code itself, so a call starts
/// without a thread being woken.
///
/// While it runs plugin code nobody reads, until the job is over (the usual case: the thread
/// reads again) or a reader is needed: the job has run for ``readerAfter`` (a timer fires), or
/// the plugin called a host function that waits for the host (``ensureReader()``). Then an idle
/// thread (or a new one) takes over the reading, so a handler may wait for its own subcommand's
/// reply, and `can_handle` and cancellations are read while handlers run. Waking a thread costs
/// tens of microseconds on a virtual machine, more than a whole quick call; arming the timer
/// costs a system call and wakes nobody.
final class WorkerThreads: Sendable {
    private let channel: FrameChannel
    private let job: @Sendable (WorkerFrame) -> (@Sendable () -> Void)?
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    /// Fires when plugin code may have run for `readerAfter` with nobody reading.
    private let timer: Int32
    /// How long a reader keeps asking the socket before it sleeps in `recv` (see ``FrameChannel/receive(spinning:)``).
    static let spin = SpinBudget.duration(default: .microseconds(50))
    /// How long plugin code may run with nobody reading before another thread reads beside it.
    static let readerAfter: Duration = .milliseconds(1)

    private struct State {
        /// Whether a thread is reading.
        var reading = false
        /// Threads waiting on `wake`.
        var idle = 0
        /// Since when nobody has been reading, while plugin code runs.
        var unreadSince: ContinuousClock.Instant?
        /// Whether the timer is set. It is set once for a stream of quick calls, not per call:
        /// setting a timer costs microseconds on a virtual machine.
        var timerSet = false
    }

    init(channel: FrameChannel, job: @escaping @Sendable (WorkerFrame) -> (@Sendable () -> Void)?) {
        self.channel = channel
        self.job = job
        timer = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_CLOEXEC))
    }

    /// Runs this thread as one of the worker's threads; the worker exits when the host's end closes.
    func serve() -> Never {
        if timer >= 0 { DetachedThread.start { [self] in watchTimer() } }
        return member()
    }

    private func member() -> Never {
        while true {
            let reader = state.withLock { state -> Bool in
                if !state.reading {
                    state.reading = true
                    state.unreadSince = nil
                    return true
                }
                state.idle += 1
                return false
            }
            guard reader else {
                wake.wait()
                continue
            }
            var work: (@Sendable () -> Void)?
            while work == nil {
                guard let frame = channel.receive(spinning: Self.spin) else { _exit(0) }
                work = job(frame)
            }
            let setTimer = state.withLock { state -> Bool in
                state.reading = false
                state.unreadSince = state.unreadSince ?? .now
                defer { state.timerSet = true }
                return !state.timerSet
            }
            if timer < 0 {
                ensureReader()
            } else if setTimer {
                set(timer: Self.readerAfter)
            }
            work?()
        }
    }

    /// Makes sure a thread reads now: an idle one is woken, or a new one started, if nobody reads.
    func ensureReader() {
        let start = state.withLock { state -> Bool? in
            guard !state.reading else { return nil }
            guard state.idle > 0 else { return true }
            state.idle -= 1
            return false
        }
        switch start {
        case true?: DetachedThread.start { [self] in member() }
        case false?: wake.signal()
        case nil: break
        }
    }

    private func set(timer delay: Duration) {
        let nanoseconds = max(1, delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000)
        var setting = itimerspec(
            it_interval: timespec(tv_sec: 0, tv_nsec: 0),
            it_value: timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        )
        timerfd_settime(timer, 0, &setting, nil)
    }

    /// The timer's thread: when the timer fires, a reader starts if plugin code has run for
    /// `readerAfter` with nobody reading; if it ran for less, the timer is set for the rest.
    private func watchTimer() {
        var expirations: UInt64 = 0
        while true {
            let got = read(timer, &expirations, MemoryLayout<UInt64>.size)
            if got < 0 && errno == EINTR { continue }
            guard got == MemoryLayout<UInt64>.size else { return }
            let now = ContinuousClock.now
            let rest = state.withLock { state -> Duration? in
                guard !state.reading, let since = state.unreadSince, now - since < Self.readerAfter else {
                    state.timerSet = false
                    return nil
                }
                return since + Self.readerAfter - now
            }
            if let rest { set(timer: rest) } else { ensureReader() }
        }
    }
}

/// The plugin's functions and state. (Unchecked `Sendable`: they are the plugin's, which
/// promises they may be called from any thread.)
private struct PluginEntryPoints: @unchecked Sendable {
    let descriptor: cmdbus_plugin_descriptor
    let state: UnsafeMutableRawPointer?
    let handleDecides: Bool

    /// Asks `can_handle()` (on a handle of its own), answering as the ABI does: 1, 0 or -status, and any message.
    func canHandle(index: UInt32, payload: WorkerPayload) -> (Int32, [UInt8]) {
        guard let canHandle = descriptor.can_handle else { return (1, []) }
        let probe = WorkerCall(id: 0, payload: payload)
        WorkerSession.register(probe)
        defer { WorkerSession.remove(probe) }
        return (canHandle(state, index, payload.bytes, probe.handle), probe.message)
    }

    /// Tells the plugin to cancel a call.
    func cancel(_ call: WorkerCall) {
        descriptor.cancel?(state, call.handle)
    }

    /// One round trip for routing and work: `can_handle()` first, and a "no" completes the call
    /// with `CMDBUS_DECLINED` (the host passes the command on), a refusal with its status.
    func decideAndHandle(index: UInt32, call: WorkerCall) {
        // A plugin whose handle() decides (ABI 1.4) declines there itself.
        if handleDecides { return handle(index: index, call: call) }
        let (answer, message) = canHandle(index: index, payload: call.payload)
        guard answer > 0 else {
            WorkerSession.remove(call)
            let status = answer == 0 ? Int32(CMDBUS_DECLINED.rawValue) : -answer
            let body = answer == 0 || !message.isEmpty ? message : Array("the plugin refused the payload".utf8)
            WorkerSession.send(.complete, id: call.id, status: status, body: body)
            return
        }
        handle(index: index, call: call)
    }

    private func handle(index: UInt32, call: WorkerCall) {
        descriptor.handle?(state, index, call.payloadBytes, call.handle)
    }
}

extension PluginWorker {
    /// No worker outlives its host: a thread of its own waits for the host's end of the channel to
    /// close (the host exited, or was killed) and ends the worker, even while a handler spins.
    /// (Not `PR_SET_PDEATHSIG`: it fires when the thread that started the worker ends, and the host
    /// starts workers again from short-lived threads.)
    static func exitWithHost() {
        DetachedThread.start {
            // POLLRDHUP (Linux): Glibc's module map leaves it out without _GNU_SOURCE.
            let peerClosed: Int16 = 0x2000
            var watch = pollfd(fd: channelDescriptor, events: peerClosed, revents: 0)
            while true {
                let ready = poll(&watch, 1, -1)
                if ready < 0 && errno == EINTR { continue }
                if ready < 0 || watch.revents & (peerClosed | Int16(POLLHUP | POLLERR | POLLNVAL)) != 0 { _exit(0) }
            }
        }
    }
}
