import CommandBus
import Foundation
import Synchronization
import Testing

/// What a handler saw of where it ran.
private final class Sightings: Sendable {
    let onCallersQueue = Mutex<Bool?>(nil)
    let task = Mutex<Int?>(nil)
}

private struct Look: Command {
    typealias Result = Bool
    static let name = "look"
}

private struct LookHandler: CommandHandler {
    let sightings: Sightings
    func handle(_ command: Look, context: CommandContext) async throws -> Bool {
        sightings.onCallersQueue.withLock { $0 = DispatchQueue.getSpecific(key: callerQueueKey) == true }
        sightings.task.withLock { $0 = withUnsafeCurrentTask { $0?.hashValue } }
        return true
    }
}

private struct Wait: Command {
    typealias Result = Bool
    static let name = "wait"
}

private struct WaitHandler: CommandHandler {
    func handle(_ command: Wait, context: CommandContext) async throws -> Bool {
        try await Task.sleep(for: .seconds(3600))
        return true
    }
}

/// `send` runs a root command on the caller's task when nothing forces a hop, with the
/// guarantees of a command in a task of its own.
struct SendOnCallersTaskTests {
    @Test func aSendRunsItsHandlerOnTheCallersTask() async throws {
        let bus = CommandBus()
        let sightings = Sightings()
        bus.register(LookHandler(sightings: sightings))
        let caller = withUnsafeCurrentTask { $0?.hashValue }
        _ = try await bus.send(Look())
        #expect(sightings.task.withLock { $0 } == caller)
    }

    @Test func aHandlerNeverRunsOnTheCallersActor() async throws {
        let bus = CommandBus()
        let sightings = Sightings()
        bus.register(LookHandler(sightings: sightings))
        let caller = Caller()
        #expect(try await caller.send(Look(), on: bus))
        #expect(sightings.onCallersQueue.withLock { $0 } == false)
    }

    /// Had the cancellation not reached the handler, it would sleep for an hour: the time limit fails it.
    @Test(.timeLimit(.minutes(2))) func cancellingTheCallerCancelsTheCommand() async throws {
        let bus = CommandBus()
        bus.register(WaitHandler())
        let states = Mutex<[CommandState]>([])
        let events = bus.events()
        let watcher = Task {
            for await event in events {
                if case .stateChanged(_, let to) = event.kind { states.withLock { $0.append(to) } }
                if case .stateChanged(_, .cancelled) = event.kind { return }
            }
        }
        let caller = Task { try await bus.send(Wait()) }
        try await Task.sleep(for: .milliseconds(100))
        caller.cancel()
        await #expect {
            try await caller.value
        } throws: { error in
            (error as? CommandBusError)?.code == .cancelled
        }
        await watcher.value
        #expect(states.withLock { $0 } == [.running, .cancelled])
    }

    /// A parent that posts a child and waits: cancelling the caller reaches the child, which
    /// would otherwise sleep for an hour (the time limit fails it).
    @Test(.timeLimit(.minutes(2))) func cancellingTheCallerCancelsTheSubcommands() async throws {
        try await expectCancellingTheCallerCancelsTheChild { try await Task.sleep(for: .seconds(3600)) }
    }

    /// A parent that ignores its caller's cancellation and returns normally: its child, still
    /// sleeping, is cancelled when the parent waits for it, and the send ends `cancelled`.
    @Test(.timeLimit(.minutes(2))) func aParentIgnoringCancellationStillHasItsChildrenCancelled() async throws {
        // Notices the cancellation, then returns as if nothing happened.
        try await expectCancellingTheCallerCancelsTheChild { while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) } }
    }

    /// Sends a parent whose handler posts a `Wait` child and then runs `afterPosting`; cancels
    /// the caller once the child exists, and expects the send and the child to end `cancelled`.
    private func expectCancellingTheCallerCancelsTheChild(afterPosting: @escaping @Sendable () async throws -> Void) async throws {
        struct Parent: Command {
            typealias Result = Bool
            static let name = "parent"
        }
        struct ParentHandler: CommandHandler {
            let child: @Sendable (CommandTicket<Bool>) -> Void
            let afterPosting: @Sendable () async throws -> Void
            func handle(_ command: Parent, context: CommandContext) async throws -> Bool {
                child(context.post(Wait()))
                try await afterPosting()
                return true
            }
        }
        let child = Mutex<CommandTicket<Bool>?>(nil)
        let bus = CommandBus()
        bus.register(WaitHandler())
        bus.register(ParentHandler(child: { ticket in child.withLock { $0 = ticket } }, afterPosting: afterPosting))
        let caller = Task { try await bus.send(Parent()) }
        while child.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(5)) }
        caller.cancel()
        await #expect(throws: CommandBusError(code: .cancelled, message: "")) { try await caller.value }
        let ticket = try #require(child.withLock { $0 })
        await #expect(throws: CommandBusError(code: .cancelled, message: "")) { try await ticket.result }
    }

    @Test func aDeadlineStillEndsAHandlerThatIgnoresIt() async throws {
        struct Stubborn: Command {
            typealias Result = Bool
            static let name = "stubborn"
        }
        struct StubbornHandler: CommandHandler {
            /// Ignores cancellation for 20 s without holding a thread.
            func handle(_ command: Stubborn, context: CommandContext) async throws -> Bool {
                await withCheckedContinuation { continuation in
                    DispatchQueue.global().asyncAfter(deadline: .now() + 20) { continuation.resume() }
                }
                return true
            }
        }
        let bus = CommandBus()
        bus.register(StubbornHandler())
        // Had the deadline waited for the handler, this would return `true` after 20 s.
        await #expect {
            try await bus.send(Stubborn(), timeout: .milliseconds(200))
        } throws: { error in
            (error as? CommandBusError)?.code == .timedOut
        }
    }
}

private let callerQueueKey = DispatchSpecificKey<Bool>()

/// An actor whose jobs run on a queue of its own, so a handler can tell whether it ran there.
private actor Caller {
    private let executor = QueueExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    func send(_ command: Look, on bus: CommandBus) async throws -> Bool {
        #expect(DispatchQueue.getSpecific(key: callerQueueKey) == true)
        return try await bus.send(command)
    }
}

private final class QueueExecutor: SerialExecutor {
    private let queue: DispatchQueue = {
        let queue = DispatchQueue(label: "caller")
        queue.setSpecific(key: callerQueueKey, value: true)
        return queue
    }()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }
}

/// A ticket tells a callback of the end, with no task waiting.
struct TicketCallbackTests {
    @Test func whenFinishedHearsTheResultOnceAndAtOnceIfItIsOver() async throws {
        let bus = CommandBus()
        bus.register(LookHandler(sightings: Sightings()))
        let heard = Mutex<[Bool]>([])
        let ticket = bus.post(Look())
        let done = Signal()
        ticket.whenFinished { result in
            heard.withLock { $0.append((try? result.get()) ?? false) }
            done.fire()
        }
        #expect(await waitUntil { done.isFired })
        // Already over: told at once, on this thread.
        ticket.whenFinished { result in heard.withLock { $0.append((try? result.get()) ?? false) } }
        #expect(heard.withLock { $0 } == [true, true])
    }

    @Test func whenFinishedHearsAFailure() async throws {
        let bus = CommandBus()
        let ticket = bus.post(name: "nobody", payload: Data("{}".utf8))
        let code = Mutex<CommandBusError.Code?>(nil)
        let done = Signal()
        ticket.whenFinished { result in
            if case .failure(let error) = result { code.withLock { $0 = error.code } }
            done.fire()
        }
        #expect(await waitUntil { done.isFired })
        #expect(code.withLock { $0 } == .noHandler)
    }
}
