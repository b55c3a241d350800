import CommandBusPlugin
import Template
import Testing

struct TemplateTests {
    @Test func helloGreetsByName() async throws {
        let handler = TemplateHelloHandler()
        #expect(handler.canHandle(TemplateHello(name: "Ada")))
        #expect(!handler.canHandle(TemplateHello(name: "")))
        let greeting = try await handler.handle(TemplateHello(name: "Ada"), context: .detached())
        #expect(greeting == TemplateGreeting(message: "Hello, Ada!"))
    }
}
