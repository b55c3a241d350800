@testable import CommandBusServer
import Foundation
import Glibc
import Synchronization
import Testing

/// The request loop's executor on its own: its jobs run on the thread that drives it, a job that
/// holds that thread too long has the loop taken over by a new one, and the server's choice of
/// which sends run there.
struct LoopExecutorTests {
    /// The threads that drove an executor, in generation order.
    final class Drivers: Sendable {
        let threads = Mutex<[UInt64: pthread_t]>([:])

        /// A driver as the request loop is one, without sockets: it runs what is queued and
        /// naps briefly when nothing is, until a newer generation takes over.
        func drive(_ executor: LoopExecutor, as generation: UInt64) {
            threads.withLock { $0[generation] = pthread_self() }
            while executor.runQueued(as: generation) {
                if !executor.hasQueued { usleep(100) }
            }
        }
    }

    /// What ran, in order.
    final class Order: Sendable {
        let names = Mutex<[String]>([])
        func append(_ name: String) { names.withLock { $0.append(name) } }
        var all: [String] { names.withLock { $0 } }
    }

    /// With takeovers only after 10 s: under the default 10 ms, a job whose thread a loaded machine
    /// left waiting that long was taken over, and ran on the next driver (a CI rehearsal saw it).
    @Test func jobsRunOnTheDrivingThread() async throws {
        let executor = LoopExecutor(takeoverAfter: .seconds(10))
        let drivers = Drivers()
        executor.start { generation in drivers.drive(executor, as: generation) }
        for _ in 0..<20 {
            let thread = await Task(executorPreference: executor) { pthread_self() }.value
            let driver = try #require(drivers.threads.withLock { $0[0] })
            #expect(pthread_equal(thread, driver) != 0)
        }
        // Resumed after a suspension, a task comes back to the loop, not to the pool.
        let (before, after) = await Task(executorPreference: executor) { () async -> (pthread_t, pthread_t) in
            let before = pthread_self()
            try? await Task.sleep(for: .milliseconds(5))
            return (before, pthread_self())
        }.value
        #expect(pthread_equal(before, after) != 0)
        #expect(executor.takeovers == 0)
    }

    @Test(.timeLimit(.minutes(1)))
    func aJobThatHoldsTheLoopTooLongHasItTakenOver() async throws {
        let executor = LoopExecutor(takeoverAfter: .milliseconds(20))
        let drivers = Drivers()
        executor.start { generation in drivers.drive(executor, as: generation) }
        let order = Order()
        // The blocker holds the loop until the quick job has run, however long the machine takes
        // to get to it (a fixed 1.5 s hold ended first in full, parallel runs): without a
        // takeover the quick job never runs, and the time limit fails the test.
        let gate = Gate()
        let blocker = Task(executorPreference: executor) { () -> pthread_t in
            gate.hold()
            order.append("blocker")
            return pthread_self()
        }
        try await Task.sleep(for: .milliseconds(100))
        let quick = await Task(executorPreference: executor) { () -> pthread_t in
            order.append("quick")
            return pthread_self()
        }.value
        gate.open.store(true, ordering: .releasing)
        let blocked = await blocker.value
        #expect(order.all == ["quick", "blocker"])
        #expect(executor.takeovers == 1)
        let threads = drivers.threads.withLock { $0 }
        #expect(threads.count == 2)
        #expect(pthread_equal(blocked, try #require(threads[0])) != 0)
        #expect(pthread_equal(quick, try #require(threads[1])) != 0)
        // The new driver keeps the loop: later jobs run on it, and nothing else is taken over.
        let later = await Task(executorPreference: executor) { pthread_self() }.value
        #expect(pthread_equal(later, try #require(threads[1])) != 0)
        #expect(executor.takeovers == 1)
    }

    @Test(.timeLimit(.minutes(1)))
    func aNameThatHeldTheLoopRunsOnTheRunnersForItsProbation() async throws {
        let executor = LoopExecutor(takeoverAfter: .milliseconds(10))
        let drivers = Drivers()
        executor.start { generation in drivers.drive(executor, as: generation) }
        let sends = InlineSends(executor: executor)
        let now = ContinuousClock.now
        #expect(sends.admits("greet", now: now))
        // Slow, but nothing was taken over meanwhile (a journal's sync, a busy machine): no probation.
        let quiet = sends.start(now: now)
        #expect(sends.finished("greet", quiet, now: now + .milliseconds(50)) == nil)
        #expect(sends.admits("greet", now: now + .milliseconds(50)))
        // One that held the loop: a takeover happened while it ran.
        let held = sends.start(now: now)
        await Task(executorPreference: executor) { _ = usleep(200_000) }.value
        #expect(executor.takeovers == 1)
        // Quick, though a takeover happened meanwhile (another send's): no probation either.
        #expect(sends.finished("greet", held, now: now + .milliseconds(9)) == nil)
        // Once is forgiven (a loaded machine can deschedule a quick command); twice within the
        // probation is not, and the probation runs from the second time.
        #expect(sends.finished("slow", held, now: now + .milliseconds(100)) == nil)
        #expect(sends.admits("slow", now: now + .milliseconds(100)))
        #expect(sends.finished("slow", held, now: now + .milliseconds(200)) == .milliseconds(200))
        let ended = now + .milliseconds(200)
        #expect(!sends.admits("slow", now: ended))
        #expect(!sends.admits("slow", now: ended + InlineSends.probation - .milliseconds(1)))
        #expect(sends.admits("greet", now: ended))
        #expect(sends.admits("slow", now: ended + InlineSends.probation))
        #expect(sends.admits("slow", now: ended + InlineSends.probation + .milliseconds(1)))
        // A first time forgotten after the probation's length: the next is a first time again.
        #expect(sends.finished("rare", held, now: now + .milliseconds(20)) == nil)
        #expect(sends.finished("rare", held, now: now + .milliseconds(20) + InlineSends.probation) == nil)
        #expect(sends.admits("rare", now: now + .milliseconds(30) + InlineSends.probation))
    }

    /// Released by the test: jobs that hold their thread until then.
    final class Gate: Sendable {
        let open = Atomic<Bool>(false)
        func hold() { while !open.load(ordering: .acquiring) { usleep(1_000) } }
    }

    @Test(.timeLimit(.minutes(1)))
    func theLoopTakesNoWorkOfItsOwnWhileTooManyDriversAreHeld() async throws {
        let executor = LoopExecutor(takeoverAfter: .milliseconds(10), maxStuckDrivers: 2)
        let drivers = Drivers()
        executor.start { generation in drivers.drive(executor, as: generation) }
        let sends = InlineSends(executor: executor)
        let gate = Gate()
        var held: [Task<Void, Never>] = []
        for taken in 1...2 {
            #expect(sends.admits("stuck"))
            held.append(Task(executorPreference: executor) { gate.hold() })
            #expect(await waitUntil(.seconds(10)) { executor.takeovers == taken })
        }
        #expect(executor.stuckDrivers == 2)
        #expect(!executor.takesWork)
        #expect(!sends.admits("greet"))
        // The newest driver still runs what it is given; the loop only stops choosing more.
        let thread = await Task(executorPreference: executor) { pthread_self() }.value
        #expect(pthread_equal(thread, try #require(drivers.threads.withLock { $0[2] })) != 0)
        gate.open.store(true, ordering: .releasing)
        for task in held { await task.value }
        #expect(await waitUntil(.seconds(10)) { executor.stuckDrivers == 0 })
        #expect(sends.admits("greet"))
    }

    @Test func noSendRunsOnTheLoopWhileAnotherWaitsThere() async throws {
        let executor = LoopExecutor()
        let sends = InlineSends(executor: executor)
        // Not started yet: a job queued now waits, and the loop admits nothing behind it.
        let waiting = Task(executorPreference: executor) { 1 }
        try await Task.sleep(for: .milliseconds(20))
        #expect(executor.queuedCount == 1)
        #expect(!sends.admits("greet"))
        let drivers = Drivers()
        executor.start { generation in drivers.drive(executor, as: generation) }
        #expect(await waiting.value == 1)
        #expect(sends.admits("greet"))
    }
}
