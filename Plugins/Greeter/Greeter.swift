import CommandBusPlugin

/// `greet {"name": "Ada"}` → `{"greeting": "Hello, Ada!"}`.
struct Greet: PluginCommand {
    typealias Result = Greeting
    static let name = "greet"
    var name: String
}

struct Greeting: Codable, Sendable {
    var greeting: String
}

/// Greets by name; refuses an empty name (`canHandle` says no).
struct GreetHandler: PluginHandler {
    func canHandle(_ command: Greet) -> Bool {
        !command.name.allSatisfy(\.isWhitespace)
    }

    func handle(_ command: Greet, context: PluginContext) async throws -> Greeting {
        Greeting(greeting: "Hello, \(command.name)!")
    }
}

/// The plugin's entry point: the one symbol the host looks for.
@_cdecl("cmdbus_plugin_v1")
public func cmdbusPluginV1() -> UnsafeRawPointer {
    Plugin(name: "greeter", version: "1.0.0", handlers: [GreetHandler()]).export()
}
