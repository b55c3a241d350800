import CEpoll
import CommandBusSupport
import Dispatch
import Glibc
import Synchronization

/// The request loop's thread as a task executor: a `send` that prefers it runs on the thread
/// that read it, between bursts of requests, instead of on a runner of the cooperative pool.
///
/// Handing a command to the pool meant waking one of its threads, and on a virtual machine a
/// wake costs tens of microseconds: most of an unjournaled round trip through the socket. The
/// loop is awake anyway (it spins before it sleeps), so a quick command costs it no wake at all,
/// and a journaled one resumes here when its write is durable.
///
/// One thread drives the loop at a time, and a command must not hold it: the other clients wait
/// meanwhile. A watchdog looks at the job running now every half of ``takeoverAfter``; once one
/// has run longer than that, the loop is given to a new thread (a new *generation*), and the
/// thread running the long job stops driving when the job returns. So a handler that blocks (a
/// plugin that sleeps, a long computation) holds the other clients up for about
/// ``takeoverAfter`` once, not for as long as it runs. While ``maxStuckDrivers`` taken-over
/// threads are still held by their jobs, the loop takes no new command of its own.
///
/// ```
/// driver thread (generation n)          watchdog
///   read requests ─ run jobs ─┐          looks every takeoverAfter / 2
///         ▲                   │ a job runs too long
///         └──── epoll ◀───────┘          ─▶ generation n + 1 on a new thread
/// ```
final class LoopExecutor: TaskExecutor, Sendable {
    private struct State {
        var jobs: [UnownedJob] = []
        /// The index in `jobs` of the next one to run; the run ones are dropped in bulk.
        var head = 0
        /// The driver is (about to be) asleep in `epoll_wait`: a new job must wake it.
        var sleeping = false
        /// The generation that drives the loop now, raised at each takeover.
        var generation: UInt64 = 0
        /// When the job running now began; `nil` between jobs.
        var jobStarted: ContinuousClock.Instant?
        /// Jobs started since the watchdog last looked: it sleeps once a look finds none.
        var started = 0
        /// The watchdog is looking, rather than waiting for work.
        var watching = false
        var takeovers = 0
        /// Drivers taken over whose long job has not returned yet.
        var stuck = 0

        var queued: Int { jobs.count - head }

        mutating func take() -> UnownedJob? {
            guard head < jobs.count else { return nil }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: jobs.capacity <= 1_024)
                head = 0
            }
            return job
        }
    }

    /// How long one job may hold the loop before a new thread takes it over.
    let takeoverAfter: Duration
    /// How many taken-over drivers may still be running their long jobs before the loop takes no
    /// more work of its own (``takesWork``): a handler that never returns costs one thread each
    /// time it runs here, and this bounds them.
    let maxStuckDrivers: Int
    private let state = Mutex(State())
    /// Readable after a job is queued while the driver sleeps; the loop waits on it in its `epoll` set.
    let wakeDescriptor: Int32
    private let watchdogWake = DispatchSemaphore(value: 0)
    private let driver = Mutex<Callback<UInt64>?>(nil)

    /// An executor whose jobs one driver runs; nothing runs until ``start(driver:)``.
    init(takeoverAfter: Duration = .milliseconds(10), maxStuckDrivers: Int = 8) {
        self.takeoverAfter = takeoverAfter
        self.maxStuckDrivers = maxStuckDrivers
        wakeDescriptor = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
    }

    /// Starts `drive` on a thread of its own as generation 0, and again on a new thread with the
    /// next generation whenever a job holds the loop too long. `drive` runs the loop until
    /// ``runQueued(as:)`` returns `false`, then returns.
    func start(driver drive: @escaping @Sendable (UInt64) -> Void) {
        driver.withLock { $0 = Callback(drive) }
        DetachedThread.start(named: "loop-watch") { [self] in watch() }
        DetachedThread.start(named: "request-loop") { drive(0) }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let (wakeDriver, wakeWatchdog) = state.withLock { state -> (Bool, Bool) in
            state.jobs.append(job)
            let wakeDriver = state.sleeping
            state.sleeping = false
            let wakeWatchdog = !state.watching
            state.watching = true
            return (wakeDriver, wakeWatchdog)
        }
        if wakeDriver {
            var one: UInt64 = 1
            _ = write(wakeDescriptor, &one, 8)
        }
        if wakeWatchdog { watchdogWake.signal() }
    }

    /// Whether jobs wait to run.
    var hasQueued: Bool { state.withLock { $0.queued > 0 } }

    /// Jobs waiting to run now.
    var queuedCount: Int { state.withLock { $0.queued } }

    /// Whether the loop should take a new command of its own: none waits to run here, and fewer
    /// than ``maxStuckDrivers`` taken-over drivers are still held by their jobs.
    var takesWork: Bool { state.withLock { $0.queued == 0 && $0.stuck < maxStuckDrivers } }

    /// Taken-over drivers whose long job has not returned yet.
    var stuckDrivers: Int { state.withLock { $0.stuck } }

    /// How many times a job held the loop too long and a new thread took it over.
    var takeovers: Int { state.withLock { $0.takeovers } }

    /// Runs the queued jobs, and those they queue, on the calling driver of `generation`.
    /// - Returns: `false` when a job held the loop too long and a newer generation drives it
    ///   now: the caller must leave the loop's state alone and return.
    func runQueued(as generation: UInt64) -> Bool {
        let executor = asUnownedTaskExecutor()
        var ran = false
        while true {
            let next = state.withLock { state -> UnownedJob?? in
                if ran {
                    // A takeover while the job ran: the loop is another thread's now.
                    guard state.generation == generation else {
                        state.stuck -= 1
                        return .some(nil)
                    }
                    state.jobStarted = nil
                }
                guard let job = state.take() else { return nil }
                state.jobStarted = .now
                state.started += 1
                return .some(job)
            }
            guard let next else { return true }
            guard let job = next else { return false }
            ran = true
            job.runSynchronously(on: executor)
        }
    }

    /// Marks the driver asleep unless a job waits.
    /// - Returns: `false` if a job waits: the driver must run it rather than sleep.
    func prepareToSleep() -> Bool {
        state.withLock { state in
            guard state.queued == 0 else { return false }
            state.sleeping = true
            return true
        }
    }

    /// The driver is awake again: takes back its sleep mark and empties the wake descriptor.
    func awake() {
        state.withLock { $0.sleeping = false }
        var count: UInt64 = 0
        _ = read(wakeDescriptor, &count, 8)
    }

    /// The watchdog: while jobs run, looks every half of ``takeoverAfter`` for one that has run
    /// longer than that, and hands the loop to a new generation; sleeps while no job comes.
    private func watch() {
        let tick = takeoverAfter / 2
        let tickMicroseconds = UInt32(max(1, tick.components.seconds * 1_000_000 + tick.components.attoseconds / 1_000_000_000_000))
        while true {
            watchdogWake.wait()
            while true {
                usleep(tickMicroseconds)
                let look = state.withLock { state -> (takeover: UInt64?, idle: Bool) in
                    defer { state.started = 0 }
                    if let began = state.jobStarted, ContinuousClock.now - began >= takeoverAfter {
                        state.generation += 1
                        state.jobStarted = nil
                        state.takeovers += 1
                        state.stuck += 1
                        return (state.generation, false)
                    }
                    guard state.started == 0, state.jobStarted == nil, state.queued == 0 else { return (nil, false) }
                    state.watching = false
                    return (nil, true)
                }
                if let generation = look.takeover, let drive = driver.withLock({ $0 }) {
                    DetachedThread.start(named: "request-loop") { drive(generation) }
                }
                if look.idle { break }
            }
        }
    }
}
