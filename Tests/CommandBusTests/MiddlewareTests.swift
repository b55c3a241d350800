import CommandBus
import Foundation
import Synchronization
import Testing

struct MiddlewareTests {
    @Test func retriesRetryableErrorsWithBackoff() async throws {
        let deadLetters = FailedCommandRecorder()
        let bus = CommandBus(configuration: .init(middleware: [
            deadLetters, RetryMiddleware(maxAttempts: 4, initialDelay: .milliseconds(1)),
        ]))
        let calls = Atomic<Int>(0)
        bus.register(ClosureHandler<Work> { command, _ in
            if calls.add(1, ordering: .relaxed).newValue < 3 { throw TransientFailure() }
            return command.value
        })
        #expect(try await bus.send(Work(value: 5)) == 5)
        #expect(calls.load(ordering: .relaxed) == 3)
        #expect(deadLetters.failures.isEmpty)
    }

    @Test func doesNotRetryOrdinaryErrorsAndRecordsTheFailure() async throws {
        let deadLetters = FailedCommandRecorder()
        let bus = CommandBus(configuration: .init(middleware: [deadLetters, RetryMiddleware(initialDelay: .milliseconds(1))]))
        let calls = Atomic<Int>(0)
        bus.register(ClosureHandler<Work> { _, _ in
            calls.add(1, ordering: .relaxed)
            throw Failure(description: "bad input")
        })
        let ticket = bus.post(Work(value: 1))
        await #expect(throws: CommandBusError(code: .handlerFailed, message: "")) { try await ticket.result }
        #expect(calls.load(ordering: .relaxed) == 1)
        let failure = try #require(deadLetters.failures.first)
        #expect(failure.envelope.id == ticket.id)
        #expect(failure.attempts == 1)
        #expect(failure.error.message.contains("bad input"))
    }

    @Test func recordsTheAttemptsOfAnExhaustedRetry() async throws {
        let deadLetters = FailedCommandRecorder()
        let bus = CommandBus(configuration: .init(middleware: [
            deadLetters, RetryMiddleware(maxAttempts: 3, initialDelay: .milliseconds(1)),
        ]))
        bus.register(ClosureHandler<Work> { _, _ in throw TransientFailure() })
        await #expect(throws: CommandBusError(code: .handlerFailed, message: "")) { try await bus.send(Work(value: 1)) }
        #expect(deadLetters.failures.map(\.attempts) == [3])
    }

    @Test func backoffGrowsExponentiallyUpToTheCap() {
        let retry = RetryMiddleware(initialDelay: .milliseconds(10), maxDelay: .milliseconds(50))
        #expect(retry.backoff(beforeRetry: 1) == .milliseconds(10))
        #expect(retry.backoff(beforeRetry: 2) == .milliseconds(20))
        #expect(retry.backoff(beforeRetry: 3) == .milliseconds(40))
        #expect(retry.backoff(beforeRetry: 4) == .milliseconds(50))
    }

    @Test func middlewareCanShortCircuitAndSeesTheOutcome() async throws {
        final class Cache: CommandMiddleware {
            let seen = Mutex<[String]>([])
            func intercept(_ context: CommandContext, next: () async throws -> CommandOutput) async throws -> CommandOutput {
                if context.envelope.metadata["cached"] == "yes" { return CommandOutput(Greeting(greeting: "cached")) }
                let start = ContinuousClock.now
                let output = try await next()
                let elapsed = ContinuousClock.now - start
                seen.withLock { $0.append("\(context.envelope.commandName) \(elapsed >= .zero)") }
                return output
            }
        }
        let cache = Cache()
        let bus = CommandBus(configuration: .init(middleware: [cache]))
        bus.register(GreetHandler())
        #expect(try await bus.send(Greet(name: "Ada"), metadata: ["cached": "yes"]).greeting == "cached")
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "Hello, Ada!")
        let dynamic = try await bus.send(name: "greet", payload: json(#"{"name":"x"}"#), metadata: ["cached": "yes"])
        #expect(try JSONDecoder().decode(Greeting.self, from: dynamic).greeting == "cached")
        #expect(cache.seen.withLock { $0 } == ["greet true"])
    }
}
