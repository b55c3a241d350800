/// Does the work for one command type.
///
/// A handler declares the command it handles, answers ``canHandle(_:)`` cheaply
/// without doing the work, and does the work in ``handle(_:context:)``.
///
/// ```swift
/// struct GreetHandler: CommandHandler {
///     func canHandle(_ command: Greet) -> Bool { !command.name.isEmpty }
///     func handle(_ command: Greet, context: CommandContext) async throws -> Greeting {
///         Greeting(greeting: "Hello, \(command.name)!")
///     }
/// }
/// ```
public protocol CommandHandler<HandledCommand>: Sendable {
    /// The command type this handler handles.
    associatedtype HandledCommand: Command

    /// How many of this handler's commands may run at once; `nil` (the default) means no limit, `1` one at a time.
    var maxConcurrency: Int? { get }

    /// Whether a bus with a journal writes these commands to it; `false` for queries. `true` by default.
    var isJournaled: Bool { get }

    /// Whether the handler would take `command` now, answered cheaply and without doing the work.
    ///
    /// Return `false` to say "not now" (the network is down, the name is empty); the bus
    /// then asks the next handler in priority order. The default answer is `true`.
    func canHandle(_ command: HandledCommand) -> Bool

    /// Does the work and returns the result, or throws.
    ///
    /// Cancellation arrives as Swift task cancellation: check `Task.isCancelled`
    /// or call `try Task.checkCancellation()` in long work.
    /// - Parameters:
    ///   - command: The command to handle.
    ///   - context: The command's envelope, and the way to emit events and send subcommands.
    func handle(_ command: HandledCommand, context: CommandContext) async throws -> HandledCommand.Result
}

extension CommandHandler {
    /// No limit by default.
    public var maxConcurrency: Int? { nil }

    /// Journaled by default.
    public var isJournaled: Bool { true }

    /// Takes every command by default.
    public func canHandle(_ command: HandledCommand) -> Bool { true }
}
