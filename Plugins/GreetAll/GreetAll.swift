import CommandBusPlugin

/// `greet-all {"names": ["Ada", "Lin"]}` sends one `greet` per name through the host's bus
/// (another plugin handles it), reports progress events, and returns every greeting.
struct GreetAll: PluginCommand {
    typealias Result = Greetings
    static let name = "greet-all"
    var names: [String]
}

struct Greetings: Codable, Sendable {
    var greetings: [String]
}

/// The `greet` command as this plugin sends it; its handler lives in another plugin.
struct Greet: PluginCommand {
    typealias Result = Greeting
    static let name = "greet"
    var name: String
}

struct Greeting: Codable, Sendable {
    var greeting: String
}

struct Progress: Codable, Sendable {
    var done: Int
    var total: Int
    var name: String
}

struct GreetAllHandler: PluginHandler {
    func canHandle(_ command: GreetAll) -> Bool { !command.names.isEmpty }

    func handle(_ command: GreetAll, context: PluginContext) async throws -> Greetings {
        var greetings: [String] = []
        for (index, name) in command.names.enumerated() {
            try Task.checkCancellation()
            // The command's progress, for the CLI's progress line and the dashboard.
            context.progress(done: index, total: command.names.count)
            greetings.append(try await context.send(Greet(name: name)).greeting)
            try context.emit("greeted", Progress(done: index + 1, total: command.names.count, name: name))
        }
        context.progress(done: command.names.count, total: command.names.count)
        context.log(.info, "greeted \(greetings.count) \(greetings.count == 1 ? "person" : "people")")
        return Greetings(greetings: greetings)
    }
}

/// The plugin's entry point.
@_cdecl("cmdbus_plugin_v1")
public func cmdbusPluginV1() -> UnsafeRawPointer {
    Plugin(name: "greet-all", version: "1.0.0", handlers: [GreetAllHandler()]).export()
}
