import CommandBus
import Foundation
import Testing

struct EventTests {
    @Test func handlersEmitEventsThroughTheirContext() async throws {
        let bus = CommandBus()
        bus.register(ClosureHandler<Work> { command, context in
            try context.emit("halfway", ["value": command.value])
            context.log(.info, "done soon")
            return command.value
        })
        let events = bus.events()
        let ticket = bus.post(Work(value: 8))
        _ = try await ticket.result
        var emitted: [CommandEvent.Kind] = []
        for await event in events where event.commandID == ticket.id {
            emitted.append(event.kind)
            if case .stateChanged(_, .succeeded) = event.kind { break }
        }
        #expect(emitted.contains(.emitted(name: "halfway", payload: json(#"{"value":8}"#))))
        #expect(emitted.contains(.log(level: .info, message: "done soon")))
    }

    /// A `.logs` subscriber (the server's log forwarder) gets the handlers' log lines and nothing else.
    @Test func aLogsFilterDeliversOnlyLogLines() async throws {
        let bus = CommandBus()
        bus.register(ClosureHandler<Work> { command, context in
            try context.emit("halfway", ["value": command.value])
            context.log(.info, "line \(command.value)")
            return command.value
        })
        let logs = bus.events(matching: .logs)
        for value in 0..<3 { _ = try await bus.post(Work(value: value)).result }
        bus.finishEventStreams()
        var kinds: [CommandEvent.Kind] = []
        for await event in logs { kinds.append(event.kind) }
        #expect(kinds == (0..<3).map { .log(level: .info, message: "line \($0)") })
    }

    @Test func aCorrelationFilterSeesTheWholeTreeAndNothingElse() async throws {
        let bus = CommandBus()
        bus.register(GreetHandler())
        bus.register(ClosureHandler<GreetAll> { command, context in
            var out: [String] = []
            for name in command.names { out.append(try await context.send(Greet(name: name)).greeting) }
            return out
        })
        let all = bus.events()
        let tree = bus.post(GreetAll(names: ["a", "b"]))
        _ = try await bus.send(Greet(name: "outsider"))
        _ = try await tree.result
        var seenCommands = Set<UUID>()
        for await event in all {
            if event.correlationID == tree.id { seenCommands.insert(event.commandID) }
            if event.commandID == tree.id, case .stateChanged(_, .succeeded) = event.kind { break }
        }
        #expect(seenCommands.count == 3)
    }

    @Test func aFilteredStreamDeliversOnlyMatchingEvents() async throws {
        let bus = CommandBus()
        let release = Signal()
        bus.register(GreetHandler())
        bus.register(ClosureHandler<Work> { command, _ in
            while !release.isFired { try await Task.sleep(for: .milliseconds(1)) }
            return command.value
        })
        let watched = bus.post(Work(value: 1))
        let stream = bus.events(matching: .command(watched.id))
        _ = try await bus.send(Greet(name: "two"))
        _ = try await bus.send(Greet(name: "three"))
        release.fire()
        var received: [CommandEvent] = []
        for await event in stream {
            received.append(event)
            if case .stateChanged(_, let to) = event.kind, to.isTerminal { break }
        }
        #expect(!received.isEmpty)
        #expect(received.allSatisfy { $0.commandID == watched.id })
        #expect(received.last?.kind == .stateChanged(from: .running, to: .succeeded))
    }
}
