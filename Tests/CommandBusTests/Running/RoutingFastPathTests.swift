@testable import CommandBus
import Foundation
import Testing

/// The shortcuts routing takes for the common case: the name looked up last, and a command or
/// result held as exactly the type asked for.
@Suite struct RoutingFastPathTests {
    @Test func aHandlerThatComesOrGoesIsSeenByTheNextSendWhateverWasSentBefore() async throws {
        let bus = CommandBus()
        bus.register(GreetHandler(prefix: "Low"))
        bus.register(ClosureHandler<Work> { command, _ in command.value * 2 })
        // The same name twice, then another, then the first again: each lookup is either the last
        // name's or a fresh one.
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "Low, Ada!")
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "Low, Ada!")
        #expect(try await bus.send(Work(value: 2)) == 4)
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "Low, Ada!")
        // A handler registered right after a lookup of its name takes the next command.
        let high = bus.register(GreetHandler(prefix: "High"), priority: 10)
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "High, Ada!")
        #expect(bus.handlerCount(for: Greet.name) == 2)
        // And one that goes is not asked again.
        high.cancel()
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "Low, Ada!")
        // A name looked up while it had no handler finds the one registered next.
        let payload = Data(#"{"a":1}"#.utf8)
        let cannot = await #expect(throws: CommandBusError.self) { try await bus.send(name: "later", payload: payload) }
        #expect(cannot?.code == .noHandler)
        bus.register(EchoHandler(commandName: "later"))
        #expect(try await bus.send(name: "later", payload: payload) == payload)
    }

    @Test func aValueIsHeldExactlyAsItsOwnTypeOnly() {
        // Each call is made outside `#expect`, whose expansion would pass the existential on
        // unopened: `holds` sees the held type only where Swift opens the existential, as at the
        // bus's own call sites; elsewhere it answers `false`, which sends callers down the general path.
        let work: any Command = Work(value: 1)
        let workIsWork = holds(work, exactly: Work.self), workIsGreet = holds(work, exactly: Greet.self)
        #expect(workIsWork)
        #expect(!workIsGreet)
        let result: any Encodable & Sendable = 7
        let resultIsInt = holds(result, exactly: Int.self), resultIsInt32 = holds(result, exactly: Int32.self)
        let resultIsOptional = holds(result, exactly: Int?.self)
        #expect(resultIsInt)
        #expect(!resultIsInt32)
        #expect(!resultIsOptional)
        // A class instance held under its superclass's type is not "exactly" the subclass: the
        // caller takes its general path, which casts.
        let animal: any Sendable = Dog() as Animal
        let animalIsAnimal = holds(animal, exactly: Animal.self), animalIsDog = holds(animal, exactly: Dog.self)
        #expect(animalIsAnimal)
        #expect(!animalIsDog)
        #expect(animal as? Dog != nil)
        // Not opened (`as any Command` keeps Swift from opening it, as a generic caller's own `T`
        // would), it answers `false`, never a wrong `true`.
        let unopened = holds(work as any Command, exactly: Work.self)
        #expect(!unopened)
    }
}

private class Animal: @unchecked Sendable {}
private final class Dog: Animal, @unchecked Sendable {}

