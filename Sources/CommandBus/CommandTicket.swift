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
    /// `Result` as a decodable type, or `nil` for a ticket of JSON bytes. A metatype, not a
    /// converting closure: a closure over the generic `Result` is an allocation per ticket.
    private let decodable: DecodableType?

    init(_ context: CommandContext) where Result: Decodable {
        self.context = context
        self.decodable = DecodableType(type: Result.self)
    }

    init(json context: CommandContext) where Result == Data {
        self.context = context
        self.decodable = nil
    }

    /// The output as a `Result`: decoded (or cast) for a typed ticket, JSON bytes for the other kind.
    private static func convert(
        _ output: CommandOutput, name: String, decodable: DecodableType?
    ) throws(CommandBusError) -> Result {
        guard let decodable else { return reinterpret(try output.jsonData(commandName: name), as: Result.self) }
        func value<D: Decodable>(_ type: D.Type) throws(CommandBusError) -> Result {
            // `D` is `Result`: the initialiser that set `decodable` says so.
            reinterpret(try output.value(as: D.self, commandName: name), as: Result.self)
        }
        return try value(decodable.type)
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
            try Self.convert(try await context.outcome().get(), name: context.envelope.commandName, decodable: decodable)
        }
    }

    /// Calls `body` once with the result when the command ends, on the thread that ends it (at
    /// once if it already has): the result without a task waiting for it, which is what a
    /// server answering many commands wants. Keep `body` short; it must not block.
    public func whenFinished(_ body: @escaping @Sendable (Swift.Result<Result, CommandBusError>) -> Void) {
        let decodable = decodable, name = context.envelope.commandName
        context.whenFinished { outcome in
            body(outcome.flatMap { output in
                do throws(CommandBusError) { return .success(try Self.convert(output, name: name, decodable: decodable)) } catch {
                    return .failure(error)
                }
            })
        }
    }

    /// Calls `body` once the bus has the command for good: with a journal, once its write-ahead
    /// is written (as durable as the journal makes one: synced by default), so that a process
    /// that dies after runs it again on recovery; without a journal, or for a command the journal
    /// does not keep, at once. A command that ended before its write-ahead was written (the
    /// journal refused it, it was cancelled first, or no handler would take it) reports how it
    /// ended. Called once, on the thread that wrote it (at once if it has been); keep `body`
    /// short, it must not block.
    public func whenWrittenAhead(_ body: @escaping @Sendable (Swift.Result<Void, CommandBusError>) -> Void) {
        context.whenWrittenAhead(body)
    }

    /// Whether the bus found a handler for the command when it was sent or posted; a command no
    /// handler would take (or whose payload was refused) ends `failed` without running.
    package var isRouted: Bool { context.assignment != nil }

    /// Asks the command to stop: a pending command ends `cancelled` at once, a running one sees task cancellation.
    public func cancel() {
        context.cancel()
    }
}

/// A decodable type, shareable: a metatype is immutable, but `any Decodable.Type` is not `Sendable`.
struct DecodableType: @unchecked Sendable {
    let type: any Decodable.Type
}
