import CommandBus
import Foundation
import Testing

struct EchoHandler: DynamicCommandHandler {
    let commandName: String
    func canHandle(payload: Data) throws -> Bool { payload != json("{}") }
    func handle(payload: Data, context: CommandContext) async throws -> Data { payload }
}

struct DynamicPathTests {
    @Test func typedAndDynamicPathsAgree() async throws {
        let bus = CommandBus()
        bus.register(GreetHandler())
        let typed = try await bus.send(Greet(name: "Ada"))
        let dynamic = try await bus.send(name: "greet", payload: json(#"{"name":"Ada"}"#))
        #expect(try JSONDecoder().decode(Greeting.self, from: dynamic) == typed)
        #expect(try bus.canHandle(name: "greet", payload: json(#"{"name":"Ada"}"#)) == bus.canHandle(Greet(name: "Ada")))
        #expect(try bus.canHandle(name: "greet", payload: json(#"{"name":""}"#)) == bus.canHandle(Greet(name: "")))
        #expect(try !bus.canHandle(name: "nope", payload: json("{}")))
    }

    @Test func aMissingFieldIsNamed() async {
        let bus = CommandBus()
        bus.register(GreetHandler())
        await #expect {
            try await bus.send(name: "greet", payload: json(#"{"nom":"Ada"}"#))
        } throws: { error in
            let busError = error as? CommandBusError
            return busError?.code == .decodingFailed && busError?.message.contains("'name'") == true
                && busError?.message.contains("'greet'") == true
        }
    }

    @Test func aWrongTypeIsNamed() async {
        let bus = CommandBus()
        bus.register(GreetHandler())
        await #expect {
            try await bus.send(name: "greet", payload: json(#"{"name":42}"#))
        } throws: { error in
            (error as? CommandBusError)?.message.contains("field 'name' should be a string") == true
        }
    }

    @Test func aPayloadOverTheLimitIsRefusedBeforeAnyHandlerSeesIt() async throws {
        let bus = CommandBus(configuration: .init(maxPayloadBytes: 16))
        bus.register(GreetHandler())
        await #expect {
            try await bus.send(name: "greet", payload: json(#"{"name":"Adalbert of Prussia"}"#))
        } throws: { error in
            (error as? CommandBusError)?.message == "payload for 'greet' is 30 bytes, more than the 16-byte limit"
        }
        #expect(try await bus.send(name: "greet", payload: json(#"{"name":"Ada"}"#)) == json(#"{"greeting":"Hello, Ada!"}"#))
    }

    @Test func notJSONIsADecodingFailure() {
        let bus = CommandBus()
        bus.register(GreetHandler())
        #expect(throws: CommandBusError(code: .decodingFailed, message: "")) {
            try bus.canHandle(name: "greet", payload: json("not json"))
        }
    }

    @Test func typedSendsReachDynamicHandlers() async throws {
        let bus = CommandBus()
        struct GreetingEcho: DynamicCommandHandler {
            let commandName = "greet"
            func handle(payload: Data, context: CommandContext) async throws -> Data {
                let name = try JSONDecoder().decode(Greet.self, from: payload).name
                return json(#"{"greeting":"Hi \#(name)"}"#)
            }
        }
        bus.register(GreetingEcho())
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "Hi Ada")
    }

    @Test func dynamicHandlersAnswerCanHandle() async throws {
        let bus = CommandBus()
        bus.register(EchoHandler(commandName: "echo"))
        #expect(try bus.canHandle(name: "echo", payload: json(#"{"a":1}"#)))
        #expect(try !bus.canHandle(name: "echo", payload: json("{}")))
        let ticket = bus.post(name: "echo", payload: json(#"{"a":1}"#))
        #expect(try await ticket.result == json(#"{"a":1}"#))
    }
}
