import CommandBusPlugin

/// `template.hello {"name": "Ada"}` → `{"message": "Hello, Ada!"}`.
public struct TemplateHello: PluginCommand {
    public typealias Result = TemplateGreeting
    public static let name = "template.hello"
    public var name: String

    public init(name: String) {
        self.name = name
    }
}

/// What `template.hello` answers.
public struct TemplateGreeting: Codable, Sendable, Equatable {
    public var message: String

    public init(message: String) {
        self.message = message
    }
}

/// Handles `template.hello`. Replace the body with your plugin's work.
public struct TemplateHelloHandler: PluginHandler {
    public init() {}

    /// Refuses an empty name, so `cmdbus can` says no without running anything.
    public func canHandle(_ command: TemplateHello) -> Bool {
        !command.name.isEmpty
    }

    public func handle(_ command: TemplateHello, context: PluginContext) async throws -> TemplateGreeting {
        TemplateGreeting(message: "Hello, \(command.name)!")
    }
}

/// The entry point the host looks for. Add your handlers to the list.
@_cdecl("cmdbus_plugin_v1")
public func cmdbusPluginV1() -> UnsafeRawPointer {
    Plugin(name: "template", version: "0.1.0", handlers: [TemplateHelloHandler()]).export()
}
