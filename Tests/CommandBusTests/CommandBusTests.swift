import CommandBus
import Foundation
import Testing

struct CommandBusTests {
    @Test func sendReturnsTheHandlersResult() async throws {
        let bus = CommandBus()
        bus.register(GreetHandler())
        #expect(try await bus.send(Greet(name: "Ada")) == Greeting(greeting: "Hello, Ada!"))
    }

    @Test func noHandlerNamesTheCommand() async {
        let bus = CommandBus()
        await #expect {
            try await bus.send(Greet(name: "Ada"))
        } throws: { error in
            let busError = error as? CommandBusError
            return busError?.code == .noHandler && busError?.message.contains("'greet'") == true
        }
    }

    @Test func highestPriorityHandlerThatAcceptsWins() async throws {
        let bus = CommandBus()
        bus.register(GreetHandler(prefix: "Low"), priority: 0)
        bus.register(GreetHandler(prefix: "High"), priority: 10)
        bus.register(GreetHandler(prefix: "Mid"), priority: 5)
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "High, Ada!")
    }

    @Test func aHandlerThatSaysNotNowPassesToTheNext() async throws {
        let bus = CommandBus()
        bus.register(ClosureHandler<Work>(accepts: { _ in false }) { _, _ in 1 }, priority: 10)
        bus.register(ClosureHandler<Work> { _, _ in 2 }, priority: 0)
        #expect(try await bus.send(Work(value: 0)) == 2)
    }

    @Test func equalPrioritiesGoToTheEarlierRegistration() async throws {
        let bus = CommandBus()
        bus.register(GreetHandler(prefix: "First"))
        bus.register(GreetHandler(prefix: "Second"))
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "First, Ada!")
    }

    @Test func canHandleAsksWithoutRunning() async throws {
        let bus = CommandBus()
        let ran = Signal()
        bus.register(ClosureHandler<Work>(accepts: { $0.value > 0 }) { _, _ in ran.fire(); return 0 })
        #expect(bus.canHandle(Work(value: 1)))
        #expect(!bus.canHandle(Work(value: 0)))
        #expect(!bus.canHandle(Greet(name: "Ada")))
        #expect(!ran.isFired)
    }

    @Test func cancellingARegistrationStopsRouting() async throws {
        let bus = CommandBus()
        bus.register(GreetHandler(prefix: "Fallback"))
        let registration = bus.register(GreetHandler(prefix: "Primary"), priority: 1)
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "Primary, Ada!")
        registration.cancel()
        #expect(!registration.isActive)
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "Fallback, Ada!")
        #expect(bus.handlerCount(for: Greet.name) == 1)
    }

    @Test func handlerErrorsAreWrappedWithTheirCause() async {
        let bus = CommandBus()
        bus.register(ClosureHandler<Work> { _, _ in throw Failure(description: "disk full") })
        await #expect {
            try await bus.send(Work(value: 1))
        } throws: { error in
            guard let busError = error as? CommandBusError else { return false }
            return busError.code == .handlerFailed
                && busError.message == "command 'work' failed: disk full"
                && (busError.cause as? Failure)?.description == "disk full"
        }
    }

    @Test func tenThousandConcurrentSendsAllComplete() async throws {
        let bus = CommandBus()
        bus.register(ClosureHandler<Work> { command, _ in
            await Task.yield()
            return command.value * 2
        })
        let sum = try await withThrowingTaskGroup(of: Bool.self) { group in
            for value in 0..<10_000 {
                group.addTask { try await bus.send(Work(value: value)) == value * 2 }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(sum == 10_000)
    }

    @Test func postedTicketsReportStateAndResult() async throws {
        let bus = CommandBus()
        bus.register(GreetHandler())
        let ticket = bus.post(Greet(name: "Ada"))
        #expect(try await ticket.result.greeting == "Hello, Ada!")
        #expect(ticket.state == .succeeded)
        #expect(ticket.envelope.commandName == "greet")
    }

    @Test func postWithNoHandlerFailsTheTicket() async {
        let bus = CommandBus()
        let ticket = bus.post(Greet(name: "Ada"))
        await #expect(throws: CommandBusError(code: .noHandler, message: "")) { try await ticket.result }
        #expect(ticket.state == .failed)
    }

    @Test func errorsCompareByCode() {
        let a = CommandBusError.noHandler("greet")
        let b = CommandBusError.noHandler("other")
        #expect(a == b)
        #expect(a.description.hasPrefix("noHandler: "))
        #expect(CommandBusError.Code(name: "timedOut") == .timedOut)
        #expect(CommandBusError.Code(name: "bogus") == nil)
    }

    /// A client's name of any length is cut in the message, saying how long it was (100 KB was
    /// echoed whole), and one registered handler is spoken of as one.
    @Test func aNoHandlerMessageCutsALongNameAndCountsInWords() {
        let long = CommandBusError.noHandler(String(repeating: "x", count: 100_000))
        #expect(long.message == "no handler for command '\(String(repeating: "x", count: 64))… (100000 bytes)': no handler is registered for it")
        #expect(CommandBusError.noHandler("greet", registered: 1).message == "no handler for command 'greet': 1 handler is registered but would not take it now")
        #expect(CommandBusError.noHandler("greet", registered: 2).message.hasSuffix(": 2 handlers are registered but none would take it now"))
    }
}
