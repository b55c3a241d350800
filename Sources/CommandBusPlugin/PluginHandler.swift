#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
    /// Whether a host with a journal writes these commands to it; `false` for queries. `true` by default.
    var isJournaled: Bool { get }
    /// Whether the host replays this command's succeeded journal entries into the plugin when it
    /// starts, because the plugin's state lives only in the log (event sourcing). `false` by default.
    var replaysOnStart: Bool { get }
    /// Whether the handler would take `command` now, cheaply and without doing the work.
    func canHandle(_ command: HandledCommand) -> Bool
    /// Does the work. Cancellation arrives as Swift task cancellation.
    func handle(_ command: HandledCommand, context: PluginContext) async throws -> HandledCommand.Result
}

extension PluginHandler {
    /// No limit by default.
    public var maxConcurrency: Int? { nil }
    /// Journaled by default.
    public var isJournaled: Bool { true }
    /// Not replayed by default.
    public var replaysOnStart: Bool { false }
    /// Takes every command by default.
    public func canHandle(_ command: HandledCommand) -> Bool { true }
}

/// A plugin command that can be undone by another command, its inverse (`cmdbus journal undo`).
///
/// ```swift
/// struct Add: ReversiblePluginCommand {
///     typealias Result = Total
///     static let name = "counter.add"
///     var counter: String
///     var by: Int
///     func inverse() -> Add { Add(counter: counter, by: -by) }
/// }
/// ```
public protocol ReversiblePluginCommand: PluginCommand {
    /// The command that undoes this one.
    associatedtype Inverse: PluginCommand
    /// The command that undoes this one.
    func inverse() -> Inverse
}

extension ReversiblePluginCommand {
    /// `true`: it has an inverse.
    public static var isReversible: Bool { true }

    /// `{"command": NAME, "payload": {...}}`, the form the ABI's invert() answers in.
    func encodedInverse() throws -> Data {
        try JSONWire.encode(NamedCommand(command: Inverse.name, payload: inverse()))
    }
}

/// A command with its routing name, as invert() answers it.
private struct NamedCommand<Payload: Encodable>: Encodable {
    let command: String
    let payload: Payload
}
