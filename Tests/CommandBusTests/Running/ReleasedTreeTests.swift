import CommandBus
import Foundation
import Synchronization
import Testing

/// A context seen by a handler, held weakly: `nil` once the bus has let go of it.
private struct WeakContext: Sendable {
    weak var context: CommandContext?
}

/// The contexts of every command the handlers saw, held weakly.
private final class SeenContexts: Sendable {
    private let seen = Mutex<[WeakContext]>([])

    func note(_ context: CommandContext) { seen.withLock { $0.append(WeakContext(context: context)) } }
    var count: Int { seen.withLock { $0.count } }
    var alive: Int { seen.withLock { $0.filter { $0.context != nil }.count } }
}

/// A finished command is let go of, with its subcommands: a parent kept its children, each of
/// which holds its parent, so every tree a bus ever ran stayed in memory (a host running
/// `greet-all` grew by 4 KB a tree, without end, and a heap profile found every context alive).
struct ReleasedTreeTests {
    private static func bus(noting seen: SeenContexts, childTakes: Duration = .zero) -> CommandBus {
        let bus = CommandBus()
        bus.register(ClosureHandler<Greet> { command, context in
            seen.note(context)
            if childTakes > .zero { try await Task.sleep(for: childTakes) }
            return Greeting(greeting: command.name)
        })
        bus.register(ClosureHandler<GreetAll> { command, context in
            seen.note(context)
            var out: [String] = []
            for name in command.names { out.append(try await context.send(Greet(name: name)).greeting) }
            // A posted child, which the parent's end waits for.
            _ = context.post(Greet(name: "posted"))
            return out
        })
        return bus
    }

    @Test func aFinishedTreeIsLetGo() async throws {
        let seen = SeenContexts()
        let bus = Self.bus(noting: seen)
        for round in 0..<5 {
            #expect(try await bus.send(GreetAll(names: ["a\(round)", "b"])) == ["a\(round)", "b"])
            _ = try await bus.post(GreetAll(names: ["c\(round)"])).result
        }
        #expect(seen.count == 5 * (4 + 3))
        let released = await waitUntil(.seconds(20)) { seen.alive == 0 }
        #expect(released, "\(seen.alive) of \(seen.count) contexts still alive after their trees ended")
        withExtendedLifetime(bus) {}
    }

    @Test func aCancelledTreeIsLetGoOnceItsChildrenEnd() async throws {
        let seen = SeenContexts()
        let bus = Self.bus(noting: seen, childTakes: .seconds(30))
        do {
            let events = bus.events()
            let ticket = bus.post(GreetAll(names: ["slow"]))
            // Cancelled while its child runs: the child is cancelled with it.
            #expect(await waitUntil(.seconds(20)) { seen.count == 2 })
            ticket.cancel()
            await #expect(throws: CommandBusError.self) { try await ticket.result }
            var progressAfterEnd = 0
            var ended = false
            // The child's end comes after its parent's; the parent shows no progress after its own.
            for await event in events {
                if event.commandID == ticket.id, case .stateChanged(_, let to) = event.kind, to.isTerminal { ended = true }
                if ended, event.commandID == ticket.id, case .progress = event.kind { progressAfterEnd += 1 }
                if event.commandID != ticket.id, case .stateChanged(_, let to) = event.kind, to.isTerminal { break }
            }
            #expect(progressAfterEnd == 0)
        }
        let released = await waitUntil(.seconds(20)) { seen.alive == 0 }
        #expect(released, "\(seen.alive) of \(seen.count) contexts still alive after the cancelled tree ended")
        withExtendedLifetime(bus) {}
    }
}
