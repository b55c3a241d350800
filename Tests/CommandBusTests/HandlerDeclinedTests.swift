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

    @Test func aDeclineBehindMiddlewareFallsThroughToo() async throws {
        let bus = CommandBus(configuration: .init(middleware: [RetryMiddleware(maxAttempts: 2)]))
        bus.register(DecidesLate(label: "first"), priority: 1)
        bus.register(TakesAll())
        #expect(try await bus.send(name: "pick", payload: json(#"{"say":"no"}"#)) == json(#"{"by":"fallthrough"}"#))
    }
}
