import CommandBus
import Foundation
import Testing

struct SchedulingTests {
    /// A posted command runs on a runner task (PostRunnersTests); a sent one runs on the
    /// caller's task (SendOnCallersTaskTests), never on the caller's actor.
    @Test func aPostedCommandRunsOffTheCallersTask() async throws {
        let bus = CommandBus()
        bus.register(ClosureHandler<Work> { _, _ in
            withUnsafeCurrentTask { $0.map { $0.hashValue } ?? 0 }
        })
        let callerTask = withUnsafeCurrentTask { $0.map { $0.hashValue } ?? 0 }
        #expect(try await bus.post(Work(value: 0)).result != callerTask)
    }

    @Test func cancellingATicketReachesTheHandler() async throws {
        let bus = CommandBus()
        let started = Signal()
        let sawCancellation = Signal()
        bus.register(ClosureHandler<Work> { _, _ in
            started.fire()
            do {
                try await Task.sleep(for: .seconds(60))
            } catch is CancellationError {
                sawCancellation.fire()
                throw CancellationError()
            }
            return 0
        })
        let ticket = bus.post(Work(value: 0))
        #expect(await waitUntil { started.isFired })
        ticket.cancel()
        await #expect(throws: CommandBusError(code: .cancelled, message: "")) { try await ticket.result }
        #expect(sawCancellation.isFired)
        #expect(ticket.state == .cancelled)
    }

    /// A handler that gives up with `CancellationError` (a subtask of its own was cancelled)
    /// ends its command `cancelled`, not `failed`, though nobody cancelled the command.
    @Test func aHandlerThrowingCancellationErrorEndsItsCommandCancelled() async throws {
        let bus = CommandBus()
        bus.register(ClosureHandler<Work> { _, _ in throw CancellationError() })
        await #expect(throws: CommandBusError(code: .cancelled, message: "")) { try await bus.send(Work(value: 0)) }
        let ticket = bus.post(Work(value: 1))
        await #expect(throws: CommandBusError(code: .cancelled, message: "")) { try await ticket.result }
        #expect(ticket.state == .cancelled)
    }

    @Test func cancellingTheSenderCancelsTheCommand() async throws {
        let bus = CommandBus()
        let started = Signal()
        let sawCancellation = Signal()
        bus.register(ClosureHandler<Work> { _, _ in
            started.fire()
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(1)) }
            sawCancellation.fire()
            return 0
        })
        let sender = Task { try await bus.send(Work(value: 0)) }
        #expect(await waitUntil { started.isFired })
        sender.cancel()
        _ = try? await sender.value
        #expect(await waitUntil { sawCancellation.isFired })
    }

    @Test func aTimeoutEndsTimedOutAndStopsTheHandler() async throws {
        let bus = CommandBus()
        let sawCancellation = Signal()
        bus.register(ClosureHandler<Work> { _, _ in
            do { try await Task.sleep(for: .seconds(60)) } catch { sawCancellation.fire() }
            return 0
        })
        let ticket = bus.post(Work(value: 0), timeout: .milliseconds(50))
        await #expect(throws: CommandBusError(code: .timedOut, message: "")) { try await ticket.result }
        #expect(ticket.state == .timedOut)
        #expect(await waitUntil { sawCancellation.isFired })
    }

    @Test func aTimeoutDoesNotWaitForAHandlerThatIgnoresCancellation() async throws {
        let bus = CommandBus(configuration: .init(defaultTimeout: .milliseconds(50)))
        let release = Gate()
        let releasedByFallback = Signal()
        bus.register(ClosureHandler<Work> { _, _ in
            await release.wait()
            return 0
        })
        // Only a send that waited for the handler would need this to let it go.
        let fallback = Task {
            try await Task.sleep(for: .seconds(60))
            releasedByFallback.fire()
            release.open()
        }
        await #expect(throws: CommandBusError(code: .timedOut, message: "")) { try await bus.send(Work(value: 0)) }
        #expect(!releasedByFallback.isFired, "send waited for a handler that ignored cancellation")
        release.open()
        fallback.cancel()
    }

    @Test func theBusWideLimitIsNeverExceeded() async throws {
        let bus = CommandBus(configuration: .init(maxConcurrentCommands: 4))
        let gauge = InFlightGauge()
        bus.register(ClosureHandler<Work> { command, _ in
            gauge.enter()
            defer { gauge.leave() }
            try await Task.sleep(for: .microseconds(200))
            return command.value
        })
        let tickets = (0..<400).map { bus.post(Work(value: $0)) }
        for (index, ticket) in tickets.enumerated() { #expect(try await ticket.result == index) }
        #expect(gauge.peak <= 4)
        #expect(gauge.peak >= 2)
    }

    @Test func aSerialHandlerRunsOneAtATime() async throws {
        let bus = CommandBus()
        let gauge = InFlightGauge()
        bus.register(ClosureHandler<Work>(maxConcurrency: 1) { command, _ in
            gauge.enter()
            defer { gauge.leave() }
            try await Task.sleep(for: .microseconds(100))
            return command.value
        })
        try await withThrowingTaskGroup(of: Int.self) { group in
            for value in 0..<200 { group.addTask { try await bus.send(Work(value: value)) } }
            try await group.waitForAll()
        }
        #expect(gauge.peak == 1)
    }

    @Test func aCommandCancelledWhileWaitingForASlotNeverRuns() async throws {
        let bus = CommandBus(configuration: .init(maxConcurrentCommands: 1))
        let release = Signal()
        let runs = InFlightGauge()
        bus.register(ClosureHandler<Work> { command, _ in
            runs.enter()
            while !release.isFired { try await Task.sleep(for: .milliseconds(1)) }
            return command.value
        })
        let blocker = bus.post(Work(value: 1))
        #expect(await waitUntil { blocker.state == .running })
        let waiting = bus.post(Work(value: 2))
        #expect(waiting.state == .pending)
        waiting.cancel()
        await #expect(throws: CommandBusError(code: .cancelled, message: "")) { try await waiting.result }
        release.fire()
        #expect(try await blocker.result == 1)
        #expect(runs.peak == 1)
    }
}
