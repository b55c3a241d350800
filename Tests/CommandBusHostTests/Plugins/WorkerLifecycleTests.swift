import CommandBusLoading
import Glibc
import Synchronization
import Testing

/// The isolated worker's lifecycle as a value: every transition, with no process started.
struct WorkerLifecycleTests {
    private typealias Lifecycle = WorkerLifecycle<String>
    private let t0 = ContinuousClock.now

    /// Requests a start and reports what was decided, with the waiter dropped.
    private func request(_ lifecycle: inout Lifecycle, at offset: Duration = .zero) -> String {
        switch lifecycle.requestStart(now: t0 + offset, waiter: { _ in }) {
        case .use(let worker): "use \(worker)"
        case .start: "start"
        case .joined: "joined"
        case .waitUntil(let instant): "wait \(instant - t0)"
        case .refuse(let failure): "refuse \(failure.reason)"
        }
    }

    @Test func theFirstCallerStartsAWorkerOthersWaitForItAndAllGetIt() {
        var lifecycle = Lifecycle()
        #expect(request(&lifecycle) == "start")
        let told = Told()
        #expect({ if case .joined = lifecycle.requestStart(now: t0, waiter: told.record) { true } else { false } }())
        let waiters = lifecycle.started(pid: 42, worker: "w1")
        #expect(waiters.count == 1)
        for waiter in waiters { waiter(.success("w1")) }
        #expect(told.outcomes == ["w1"])
        #expect(request(&lifecycle) == "use w1")
        #expect(lifecycle.running?.pid == 42 && lifecycle.starts == 1)
    }

    @Test func aCrashBacksOffThenAllowsARestart() {
        var lifecycle = Lifecycle()
        _ = request(&lifecycle)
        _ = lifecycle.started(pid: 42, worker: "w1")
        #expect(lifecycle.ended(pid: 42, now: t0, how: "crashed with SIGSEGV") == .crashed(quarantine: nil))
        #expect(lifecycle.running == nil)
        #expect(request(&lifecycle, at: .milliseconds(50)) == "wait 0.1 seconds")
        #expect(request(&lifecycle, at: .milliseconds(100)) == "start")
        _ = lifecycle.started(pid: 43, worker: "w2")
        #expect(lifecycle.starts == 2)
        // A second crash doubles the backoff.
        #expect(lifecycle.ended(pid: 43, now: t0 + .seconds(1), how: "crashed with SIGABRT") == .crashed(quarantine: nil))
        #expect(request(&lifecycle, at: .seconds(1)) == "wait 1.2 seconds")
    }

    /// A retired plugin's running worker is still used until it is stopped; then none starts,
    /// and a crash after retirement does not start one either.
    @Test func aRetiredPluginKeepsItsRunningWorkerButNeverStartsAnother() {
        var lifecycle = Lifecycle()
        _ = request(&lifecycle)
        _ = lifecycle.started(pid: 42, worker: "w1")
        lifecycle.retire()
        #expect(request(&lifecycle) == "use w1")
        lifecycle.killing(pid: 42)
        #expect(lifecycle.ended(pid: 42, now: t0, how: "killed") == .killedOnPurpose)
        #expect(request(&lifecycle) == "refuse its file was removed or replaced, so its worker is not started again")

        var crashed = Lifecycle()
        _ = request(&crashed)
        _ = crashed.started(pid: 7, worker: "w")
        crashed.retire()
        #expect(crashed.ended(pid: 7, now: t0, how: "crashed with SIGSEGV") == .crashed(quarantine: nil))
        #expect(request(&crashed, at: .seconds(10)).hasPrefix("refuse its file was removed"))
    }

    @Test func aWorkerKilledOnPurposeIsNotACrashAndIsReplacedAtOnce() {
        var lifecycle = Lifecycle()
        _ = request(&lifecycle)
        _ = lifecycle.started(pid: 42, worker: "w1")
        lifecycle.killing(pid: 42)
        #expect(request(&lifecycle) == "start")
        #expect(lifecycle.ended(pid: 42, now: t0, how: "crashed with SIGKILL") == .killedOnPurpose)
        #expect(lifecycle.crashes.isEmpty)
    }

    @Test func crashLimitCrashesWithinTheWindowQuarantineForGood() {
        var lifecycle = Lifecycle(crashLimit: 3, crashWindow: .seconds(60))
        var ending = Lifecycle.Ending.killedOnPurpose
        for (index, pid) in [pid_t(1), 2, 3].enumerated() {
            _ = request(&lifecycle, at: .seconds(10 * index))
            _ = lifecycle.started(pid: pid, worker: "w\(pid)")
            ending = lifecycle.ended(pid: pid, now: t0 + .seconds(10 * index), how: "crashed with SIGSEGV")
        }
        let reason = "quarantined: its worker crashed 3 times within 60 seconds (last: crashed with SIGSEGV); "
            + "replace its file with a fixed build, or try the same one again: 'cmdbus plugins forget FILE --connect' (--bus URL on the shared bus), or touch it"
        #expect(ending == .crashed(quarantine: reason))
        #expect(lifecycle.quarantine == reason)
        #expect(request(&lifecycle, at: .seconds(3600)) == "refuse \(reason)")
    }

    @Test func crashesOutsideTheWindowAreForgotten() {
        var lifecycle = Lifecycle(crashLimit: 3, crashWindow: .seconds(60))
        for (index, pid) in [pid_t(1), 2, 3].enumerated() {
            _ = request(&lifecycle, at: .seconds(40 * index))
            _ = lifecycle.started(pid: pid, worker: "w")
            _ = lifecycle.ended(pid: pid, now: t0 + .seconds(40 * index), how: "crashed with SIGSEGV")
        }
        #expect(lifecycle.quarantine == nil && lifecycle.crashes.count == 2)
    }

    @Test func aFailedStartTellsEveryWaiterAndCountsAsACrash() {
        var lifecycle = Lifecycle()
        _ = request(&lifecycle)
        let told = Told()
        _ = lifecycle.requestStart(now: t0, waiter: told.record)
        let waiters = lifecycle.startFailed(PluginLoadFailure("it exited with status 1 while loading"), now: t0)
        for waiter in waiters { waiter(.failure(PluginLoadFailure("it exited with status 1 while loading"))) }
        #expect(told.outcomes == ["failed: it exited with status 1 while loading"])
        #expect(lifecycle.crashes.count == 1 && lifecycle.running == nil)
        #expect(request(&lifecycle) == "wait 0.1 seconds")
    }

    @Test func theEndOfAnOldWorkerLeavesItsSuccessorRunning() {
        var lifecycle = Lifecycle()
        _ = request(&lifecycle)
        _ = lifecycle.started(pid: 1, worker: "old")
        lifecycle.killing(pid: 1)
        _ = request(&lifecycle)
        _ = lifecycle.started(pid: 2, worker: "new")
        #expect(lifecycle.ended(pid: 1, now: t0, how: "crashed with SIGKILL") == .killedOnPurpose)
        #expect(request(&lifecycle) == "use new")
    }
}

/// Collects what waiters were told.
private final class Told: Sendable {
    private let lock = Mutex<[String]>([])
    var outcomes: [String] { lock.withLock { $0 } }
    var record: WorkerLifecycle<String>.Waiter {
        { [self] result in
            self.lock.withLock {
                switch result {
                case .success(let worker): $0.append(worker)
                case .failure(let failure): $0.append("failed: \(failure.reason)")
                }
            }
        }
    }
}
