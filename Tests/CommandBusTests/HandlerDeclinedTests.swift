import CommandBus
import Foundation
import Synchronization
import Testing

/// A handler that says yes at once and decides in `handle`, as an isolated plugin does: it
/// declines payloads holding "no", and counts the calls it got.
private struct DecidesLate: DynamicCommandHandler {
    let commandName = "pick"
    let label: String
    let calls = Calls()
    let limit: Int?
    init(label: String, limit: Int? = nil) {
        self.label = label
        self.limit = limit
    }
    var maxConcurrency: Int? { limit }

    func wouldHandle(payload: Data) async throws -> Bool { !String(decoding: payload, as: UTF8.self).contains("no") }

    func handle(payload: Data, context: CommandContext) async throws -> Data {
        calls.count.add(1, ordering: .relaxed)
        if String(decoding: payload, as: UTF8.self).contains("no") { throw HandlerDeclined() }
        return json(#"{"by":"\#(label)"}"#)
    }
}

private final class Calls: Sendable {
    let count = Atomic(0)
}

/// A handler that holds each command until `gate` opens, then declines it, as an isolated
/// plugin taken off the bus does with a command routed to it just before.
private struct DeclinesOnceOpened: DynamicCommandHandler {
    let commandName = "pick"
    let arrived = AsyncStream<Void>.makeStream()
    let gate = AsyncStream<Void>.makeStream()

    func handle(payload: Data, context: CommandContext) async throws -> Data {
        arrived.continuation.yield()
        for await _ in gate.stream { break }
        throw HandlerDeclined()
    }
}

private struct TakesAll: DynamicCommandHandler {
    let commandName = "pick"
    func handle(payload: Data, context: CommandContext) async throws -> Data { json(#"{"by":"fallthrough"}"#) }
}

struct HandlerDeclinedTests {
    @Test func aDeclineInHandlePassesTheCommandToTheNextHandlerInTheChain() async throws {
        let bus = CommandBus()
        let first = DecidesLate(label: "first", limit: 1)
        bus.register(first, priority: 10)
        bus.register(TakesAll())
        #expect(try await bus.send(name: "pick", payload: json(#"{"say":"yes"}"#)) == json(#"{"by":"first"}"#))
        #expect(try await bus.send(name: "pick", payload: json(#"{"say":"no"}"#)) == json(#"{"by":"fallthrough"}"#))
        #expect(first.calls.count.load(ordering: .relaxed) == 2)
        // The declining handler's slot was given back: it still takes the next command.
        #expect(try await bus.send(name: "pick", payload: json(#"{"say":"yes"}"#)) == json(#"{"by":"first"}"#))
    }

    @Test func whenEveryHandlerDeclinesTheSenderHearsNoHandler() async throws {
        let bus = CommandBus()
        bus.register(DecidesLate(label: "first"), priority: 1)
        bus.register(DecidesLate(label: "second"))
        await #expect {
            try await bus.send(name: "pick", payload: json(#"{"say":"no"}"#))
        } throws: { error in
            (error as? CommandBusError)?.code == .noHandler
        }
    }

    @Test func wouldHandleAsksForTheFullAnswerWhereCanHandleTakesTheQuickYes() async throws {
        let bus = CommandBus()
        bus.register(DecidesLate(label: "first"))
        #expect(try bus.canHandle(name: "pick", payload: json(#"{"say":"no"}"#)))
        #expect(try await !bus.wouldHandle(name: "pick", payload: json(#"{"say":"no"}"#)))
        #expect(try await bus.wouldHandle(name: "pick", payload: json(#"{"say":"yes"}"#)))
        #expect(try await !bus.wouldHandle(name: "other", payload: json("{}")))
    }

    /// A handler taken off the bus after a command was routed to it, which then declines it
    /// (an isolated plugin whose file was replaced): the command goes to the chain as it stands
    /// now, where the replacement took its place, not to "no handler".
    @Test func aDeclineByAHandlerNoLongerRegisteredAsksTheChainAsItIsNow() async throws {
        let bus = CommandBus()
        let old = DeclinesOnceOpened()
        let registration = bus.register(old, priority: 5)
        let sent = Task { try await bus.send(name: "pick", payload: json(#"{"say":"yes"}"#)) }
        for await _ in old.arrived.stream { break }
        bus.register(DecidesLate(label: "replacement"), priority: 5)
        registration.cancel()
        old.gate.continuation.yield()
        #expect(try await sent.value == json(#"{"by":"replacement"}"#))
    }

    @Test func aDeclineBehindMiddlewareFallsThroughToo() async throws {
        let bus = CommandBus(configuration: .init(middleware: [RetryMiddleware(maxAttempts: 2)]))
        bus.register(DecidesLate(label: "first"), priority: 1)
        bus.register(TakesAll())
        #expect(try await bus.send(name: "pick", payload: json(#"{"say":"no"}"#)) == json(#"{"by":"fallthrough"}"#))
    }
}
