import CommandBus
import Testing

struct CommandLifecycleTests {
    @Test func followsTheHappyPath() throws {
        var lifecycle = CommandLifecycle()
        #expect(lifecycle.state == .pending)
        try lifecycle.transition(to: .running)
        try lifecycle.transition(to: .succeeded)
        #expect(lifecycle.state == .succeeded)
        #expect(lifecycle.state.isTerminal)
    }

    @Test(arguments: [CommandState.succeeded, .failed, .cancelled, .timedOut])
    func terminalStatesRefuseEveryTransition(terminal: CommandState) throws {
        for next in CommandState.allCases {
            var lifecycle = CommandLifecycle(state: terminal)
            #expect(throws: CommandLifecycle.InvalidTransition(from: terminal, to: next)) {
                try lifecycle.transition(to: next)
            }
            #expect(lifecycle.state == terminal)
        }
    }

    @Test func pendingCannotSucceedWithoutRunning() {
        var lifecycle = CommandLifecycle()
        #expect(throws: CommandLifecycle.InvalidTransition.self) { try lifecycle.transition(to: .succeeded) }
        #expect(lifecycle.state == .pending)
        #expect(!CommandLifecycle.allows(from: .running, to: .pending))
        #expect(CommandLifecycle.allows(from: .pending, to: .cancelled))
    }

    @Test func everyTransitionOfARealCommandIsObservable() async throws {
        let bus = CommandBus()
        bus.register(GreetHandler())
        let events = bus.events()
        let ticket = bus.post(Greet(name: "Ada"))
        _ = try await ticket.result
        var kinds: [CommandEvent.Kind] = []
        for await event in events where event.commandID == ticket.id {
            kinds.append(event.kind)
            if case .stateChanged(_, let to) = event.kind, to.isTerminal { break }
        }
        #expect(kinds == [.accepted, .stateChanged(from: .pending, to: .running), .stateChanged(from: .running, to: .succeeded)])
    }
}
