#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A handle on a posted command: its id, its current state, its result, and a way to cancel it.
///
/// ```swift
/// let ticket = bus.post(Greet(name: "Ada"))
/// print(ticket.state)            // .pending or .running
/// let greeting = try await ticket.result
/// ```
public struct CommandTicket<Result: Sendable>: Sendable {
    let context: CommandContext
    private let convert: @Sendable (CommandOutput, String) throws(CommandBusError) -> Result

    init(_ context: CommandContext) where Result: Decodable {
        self.context = context
        self.convert = { output, name throws(CommandBusError) in try output.value(as: Result.self, commandName: name) }
    }

    init(json context: CommandContext) where Result == Data {
        self.context = context
        self.convert = { output, name throws(CommandBusError) in try output.jsonData(commandName: name) }
    }

    /// The command's id.
    public var id: UUID { context.envelope.id }
    /// The command's envelope.
    public var envelope: CommandEnvelope { context.envelope }
    /// The command's current lifecycle state.
    public var state: CommandState { context.state }

    /// The command's result, once it has finished. Waiting does not cancel anything.
    /// - Throws: ``CommandBusError`` if the command failed, was cancelled, or timed out.
    public var result: Result {
        get async throws(CommandBusError) {
            try convert(try await context.outcome().get(), context.envelope.commandName)
        }
    }

    /// Calls `body` once with the result when the command ends, on the thread that ends it (at
    /// once if it already has): the result without a task waiting for it, which is what a
    /// server answering many commands wants. Keep `body` short; it must not block.
    public func whenFinished(_ body: @escaping @Sendable (Swift.Result<Result, CommandBusError>) -> Void) {
        let convert = convert, name = context.envelope.commandName
        context.whenFinished { outcome in
            body(outcome.flatMap { output in
                do throws(CommandBusError) { return .success(try convert(output, name)) } catch { return .failure(error) }
            })
        }
    }

    /// Asks the command to stop: a pending command ends `cancelled` at once, a running one sees task cancellation.
    public func cancel() {
        context.cancel()
    }
}
