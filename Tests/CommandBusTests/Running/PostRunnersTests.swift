import CommandBus
import Foundation
import Synchronization
import Testing

/// Posted root commands run on a few runner tasks that the bus grows when commands wait.
/// These check what a task per command gave for free: slow commands still run side by side,
/// and a cancellation reaches the command it was meant for and never the next one on its runner.
struct PostRunnersTests {
    /// 300 handlers that each wait until all 300 have started: this finishes only if the pool
    /// grows to one runner per waiting command, as a task per command would.
    @Test(.timeLimit(.minutes(1)))
    func aBurstOfSuspendedHandlersAllRunAtOnce() async throws {
        let count = 300
        let bus = CommandBus()
        bus.register(handlerWaitingForAll(count))
        let tickets = (0..<count).map { bus.post(Work(value: $0)) }
        for (index, ticket) in tickets.enumerated() { #expect(try await ticket.result == index) }
    }

    /// A cancelled command's runner retires; the commands queued behind it run on runners nobody cancelled.
    @Test func aCancellationReachesItsCommandAndNotTheNextOnTheRunner() async throws {
        let bus = CommandBus()
        let started = Atomic<Int>(0)
        let blocker = Gate()
        let queued = Mutex<[CommandTicket<Int>]>([])
        bus.register(ClosureHandler<Work> { command, _ in
            switch command.value {
            case -2:
                started.add(1, ordering: .relaxed)
                do { try await Task.sleep(for: .seconds(60)) } catch {
                    // Queue the next commands just before this runner is free to take them.
                    queued.withLock { $0 = (0..<500).map { bus.post(Work(value: $0)) } }
                    throw error
                }
            case -1:
                started.add(1, ordering: .relaxed)
                await blocker.wait()
            default:
                break
            }
            try Task.checkCancellation()
            return command.value
        })
        // Both first runners are busy: the commands the doomed one queues wait for a runner.
        let doomed = bus.post(Work(value: -2))
        let held = bus.post(Work(value: -1))
        #expect(await waitUntil { started.load(ordering: .relaxed) == 2 })
        doomed.cancel()
        await #expect(throws: CommandBusError(code: .cancelled, message: "")) { try await doomed.result }
        blocker.open()
        #expect(try await held.result == -1)
        let tickets = queued.withLock { $0 }
        #expect(tickets.count == 500)
        for (index, ticket) in tickets.enumerated() { #expect(try await ticket.result == index) }
    }

    /// Cancelling a command that has just finished is a no-op, even though its runner has moved
    /// on to the next command: the runner decides under its lock which command a cancel is for.
    @Test func cancellingAFinishedCommandNeverReachesTheRunnersNextOne() async throws {
        let bus = CommandBus()
        bus.register(ClosureHandler<Work> { command, _ in
            try Task.checkCancellation()
            return command.value
        })
        for round in 0..<2_000 {
            let first = bus.post(Work(value: round))
            let second = bus.post(Work(value: round + 1))
            #expect(try await first.result == round)
            first.cancel()
            #expect(try await second.result == round + 1)
        }
    }

    /// A deadline ends a posted command `timedOut` even if its handler ignores cancellation,
    /// and the commands behind it on a busy pool still run.
    @Test(.timeLimit(.minutes(1)))
    func aTimedOutHandlerThatIgnoresCancellationDoesNotHoldUpTheQueue() async throws {
        let bus = CommandBus()
        let release = Gate()
        bus.register(ClosureHandler<Work> { command, _ in
            if command.value < 0 { await release.wait() }
            return command.value
        })
        let stuck = (0..<4).map { _ in bus.post(Work(value: -1), timeout: .milliseconds(50)) }
        let quick = (0..<100).map { bus.post(Work(value: $0)) }
        for ticket in stuck {
            await #expect(throws: CommandBusError(code: .timedOut, message: "")) { try await ticket.result }
        }
        for (index, ticket) in quick.enumerated() { #expect(try await ticket.result == index) }
        release.open()
    }

    /// The bus-wide limit still holds when the pool grows past it.
    @Test func theBusWideLimitHoldsOnRunners() async throws {
        let bus = CommandBus(configuration: .init(maxConcurrentCommands: 3))
        let gauge = InFlightGauge()
        bus.register(ClosureHandler<Work> { command, _ in
            gauge.enter()
            defer { gauge.leave() }
            try await Task.sleep(for: .milliseconds(1))
            return command.value
        })
        let tickets = (0..<200).map { bus.post(Work(value: $0)) }
        for (index, ticket) in tickets.enumerated() { #expect(try await ticket.result == index) }
        #expect(gauge.peak <= 3)
    }
}
