/// Does the work for one plugin command, as a host's `CommandHandler` does.
///
/// ```swift
/// struct GreetHandler: PluginHandler {
///     func canHandle(_ command: Greet) -> Bool { !command.name.isEmpty }
///     func handle(_ command: Greet, context: PluginContext) async throws -> Greeting {
///         Greeting(greeting: "Hello, \(command.name)!")
///     }
/// }
/// ```
public protocol PluginHandler<HandledCommand>: Sendable {
    /// The command type this handler handles.
    associatedtype HandledCommand: PluginCommand
    /// How many of these commands may run at once; `nil` (the default) means no limit.
    var maxConcurrency: Int? { get }
    /// Whether the handler would take `command` now, cheaply and without doing the work.
    func canHandle(_ command: HandledCommand) -> Bool
    /// Does the work. Cancellation arrives as Swift task cancellation.
    func handle(_ command: HandledCommand, context: PluginContext) async throws -> HandledCommand.Result
}

extension PluginHandler {
    /// No limit by default.
    public var maxConcurrency: Int? { nil }
    /// Takes every command by default.
    public func canHandle(_ command: HandledCommand) -> Bool { true }
}
