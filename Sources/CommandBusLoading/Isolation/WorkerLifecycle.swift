import CommandBus
import CommandBusSupport
import Glibc

/// The life of an isolated plugin's worker process, as one value whose transitions return what
/// to do: no process, socket or clock in here, so every path is tested without starting one.
///
/// ```
///            start                 started
///   idle ───────────▶ starting ───────────────▶ ready
///    ▲                   │ failed                │ killed on purpose: idle
///    │ backoff over      ▼                       │ crashed
///   backingOff ◀──────── (a crash) ◀─────────────┘
///        │ crashLimit crashes within crashWindow
///        ▼
///   quarantined (until the file is loaded anew)
/// ```
///
/// `Worker` is what a running worker is to the caller (its channel and description);
/// tests use a plain value.
package struct WorkerLifecycle<Worker> {
    /// Where the worker is.
    package enum State {
        /// No worker runs; the next call starts one.
        case idle
        /// One is being started; callers wait for it with the `waiters`.
        case starting(waiters: [Waiter])
        /// One runs, as process `pid`.
        case ready(pid: pid_t, worker: Worker)
        /// It crashed; none starts again before `until`.
        case backingOff(until: ContinuousClock.Instant)
        /// It crashed too often; it never starts again (a new load of the file has a new lifecycle).
        case quarantined(reason: String)
    }

    /// Someone waiting for a start: told the worker, or why there is none.
    package typealias Waiter = @Sendable (Result<Worker, PluginLoadFailure>) -> Void

    /// What a caller who wants a worker should do.
    package enum StartDecision {
        /// Use this running worker.
        case use(Worker)
        /// Start one now (then report with ``started(pid:worker:)`` or ``startFailed(_:now:)``).
        case start
        /// Another caller is starting one: the waiter is told when it is done.
        case joined
        /// Ask again at this instant (the crash backoff).
        case waitUntil(ContinuousClock.Instant)
        /// There will be none.
        case refuse(PluginLoadFailure)
    }

    /// How a worker's end is to be taken.
    package enum Ending: Equatable {
        /// The host killed it (a deadline, a stop): not a crash.
        case killedOnPurpose
        /// A crash, counted; `quarantine` is set when it was one too many.
        case crashed(quarantine: String?)
    }

    package private(set) var state: State = .idle
    /// The recent crashes, within ``crashWindow`` of the last.
    package private(set) var crashes: [ContinuousClock.Instant] = []
    /// Workers started so far; every one after the first is a restart.
    package private(set) var starts = 0
    /// Workers the host is killing on purpose, whose end is not a crash.
    private var killed: Set<pid_t> = []
    /// Whether the plugin was taken off the bus (its file removed or replaced): the worker
    /// that runs may finish its calls, and none starts again.
    package private(set) var isRetired = false

    package let crashLimit: Int
    package let crashWindow: Duration

    package init(crashLimit: Int = 3, crashWindow: Duration = .seconds(60)) {
        self.crashLimit = crashLimit
        self.crashWindow = crashWindow
    }

    /// The running worker and its process, if any.
    package var running: (pid: pid_t, worker: Worker)? {
        if case .ready(let pid, let worker) = state { return (pid, worker) }
        return nil
    }

    /// Why it is quarantined, if it is.
    package var quarantine: String? {
        if case .quarantined(let reason) = state { return reason }
        return nil
    }

    /// A caller wants a worker; `waiter` is kept (and the answer is ``StartDecision/joined``) if one is starting.
    package mutating func requestStart(now: ContinuousClock.Instant, waiter: @escaping Waiter) -> StartDecision {
        switch state {
        case .ready(_, let worker):
            return .use(worker)
        case .quarantined(let reason):
            return .refuse(PluginLoadFailure(reason))
        case .starting(var waiters):
            waiters.append(waiter)
            state = .starting(waiters: waiters)
            return .joined
        case .idle where isRetired, .backingOff where isRetired:
            return .refuse(PluginLoadFailure("its file was removed or replaced, so its worker is not started again"))
        case .backingOff(let until) where now < until:
            return .waitUntil(until)
        case .idle, .backingOff:
            state = .starting(waiters: [])
            return .start
        }
    }

    /// The start succeeded; returns the waiters to tell.
    package mutating func started(pid: pid_t, worker: Worker) -> [Waiter] {
        let waiters = takeWaiters()
        state = .ready(pid: pid, worker: worker)
        starts += 1
        return waiters
    }

    /// The start failed (counted as a crash); returns the waiters to tell.
    package mutating func startFailed(_ failure: PluginLoadFailure, now: ContinuousClock.Instant) -> [Waiter] {
        let waiters = takeWaiters()
        state = .idle
        _ = countCrash(now: now, how: failure.reason)
        return waiters
    }

    /// The plugin is taken off the bus: a running worker goes on until the host stops it, and
    /// none starts again.
    package mutating func retire() {
        isRetired = true
    }

    /// The host is about to kill process `pid` on purpose; if it is the running worker, new calls start another.
    package mutating func killing(pid: pid_t) {
        killed.insert(pid)
        if case .ready(let running, _) = state, running == pid { state = .idle }
    }

    /// Process `pid` ended (`how`: "crashed with SIGSEGV"); says whether that was a crash.
    package mutating func ended(pid: pid_t, now: ContinuousClock.Instant, how: String) -> Ending {
        if killed.remove(pid) != nil { return .killedOnPurpose }
        if case .ready(let running, _) = state, running == pid { state = .idle }
        return .crashed(quarantine: countCrash(now: now, how: how))
    }

    /// How long after the last crash the next start may come: 100 ms, doubling with each recent crash, at most 5 s.
    package var backoff: Duration {
        guard !crashes.isEmpty else { return .zero }
        return min(Duration.milliseconds(100) * (1 << min(crashes.count - 1, 6)), .seconds(5))
    }

    /// What ends a quarantine: a server loads a plugin file anew when it changes or when asked
    /// (`cmdbus plugins forget`), and a new load starts with no crashes counted (a rescan,
    /// SIGHUP, leaves an unchanged file as it is).
    package static var liftingAQuarantine: String { "replace its file with a fixed build, or try the same one again: 'cmdbus plugins forget FILE --connect' (--bus URL on the shared bus), or touch it" }

    private mutating func countCrash(now: ContinuousClock.Instant, how: String) -> String? {
        crashes = crashes.filter { now - $0 < crashWindow } + [now]
        if crashes.count >= crashLimit {
            let reason = "quarantined: its worker crashed \(crashes.count) times within \(crashWindow.spoken) (last: \(how)); \(Self.liftingAQuarantine)"
            state = .quarantined(reason: reason)
            return reason
        }
        if case .idle = state { state = .backingOff(until: now + backoff) }
        return nil
    }

    private mutating func takeWaiters() -> [Waiter] {
        guard case .starting(let waiters) = state else { return [] }
        return waiters
    }
}
