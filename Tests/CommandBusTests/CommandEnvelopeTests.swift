import CommandBus
import Foundation
import Testing

struct CommandEnvelopeTests {
    @Test func subcommandInheritsParentAndCorrelation() {
        let root = CommandEnvelope(commandName: "greet-all", metadata: ["user": "ada"])
        let child = CommandEnvelope(commandName: "greet", parent: root, metadata: ["step": "1"])
        #expect(root.correlationID == root.id)
        #expect(root.parentID == nil)
        #expect(child.parentID == root.id)
        #expect(child.correlationID == root.correlationID)
        #expect(child.metadata == ["user": "ada", "step": "1"])
        #expect(child.id != root.id)
    }

    @Test func envelopeAndCommandRoundTripTogether() throws {
        let envelope = CommandEnvelope(commandName: Greet.name, metadata: ["source": "test"])
        let stored = EnvelopedCommand(envelope: envelope, command: Greet(name: "Ada"))
        let data = try JSONEncoder().encode(stored)
        let object = try decodeJSON(data)
        #expect(object["command"] as? String == "greet")
        #expect((object["payload"] as? [String: Any])?["name"] as? String == "Ada")

        let restored = try JSONDecoder().decode(EnvelopedCommand<Greet>.self, from: data)
        #expect(restored.envelope.id == envelope.id)
        #expect(restored.envelope.metadata == ["source": "test"])
        #expect(abs(restored.envelope.createdAt.timeIntervalSince(envelope.createdAt)) < 0.001)
        #expect(restored.command.name == "Ada")
    }

    @Test func refusesAStoredCommandOfAnotherName() throws {
        let stored = EnvelopedCommand(envelope: CommandEnvelope(commandName: Greet.name), command: Greet(name: "Ada"))
        let data = try JSONEncoder().encode(stored)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(EnvelopedCommand<Work>.self, from: data)
        }
    }

    @Test func replayingAStoredCommandReachesTheHandler() async throws {
        let bus = CommandBus()
        bus.register(GreetHandler())
        let data = try JSONEncoder().encode(
            EnvelopedCommand(envelope: CommandEnvelope(commandName: Greet.name), command: Greet(name: "Lin"))
        )
        let restored = try JSONDecoder().decode(EnvelopedCommand<Greet>.self, from: data)
        #expect(try await bus.send(restored.command).greeting == "Hello, Lin!")
    }
}
