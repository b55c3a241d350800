#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A registered handler with its command type erased, so one route table holds typed and dynamic handlers.
protocol HandlerBox: Sendable {
    var maxConcurrency: Int? { get }
    var isJournaled: Bool { get }
    /// The inverse command of the prepared one, as a name and JSON, or `nil` if it has none.
    func inverse(_ prepared: CommandPayload, commandName: String) throws(CommandBusError) -> (name: String, payload: Data)?
    /// Converts the payload into the form this handler takes (decodes JSON, or encodes a typed command).
    func prepare(_ payload: CommandPayload, commandName: String) throws(CommandBusError) -> CommandPayload
    func canHandle(_ prepared: CommandPayload, commandName: String) throws(CommandBusError) -> Bool
    /// The full answer, which a handler that decides in `handle` may have to ask for (another process).
    func wouldHandle(_ prepared: CommandPayload, commandName: String) async throws(CommandBusError) -> Bool
    nonisolated(nonsending) func handle(_ prepared: CommandPayload, context: CommandContext) async throws -> CommandOutput
}

/// Wraps a typed ``CommandHandler``.
struct TypedHandlerBox<Handler: CommandHandler>: HandlerBox {
    let handler: Handler
    /// Asks `handler` about a prepared payload; made by ``CommandBus/register(_:priority:)`` in the registering module.
    let canHandleCommand: @Sendable (Handler, CommandPayload) throws(CommandBusError) -> Bool
    /// Runs `handler` on a prepared payload; made by ``CommandBus/register(_:priority:)`` in the
    /// registering module. The handler is an argument, not a capture: a closure that captures
    /// nothing is called directly, where one that captured the handler went through a forwarding
    /// thunk, an async frame of its own.
    let handleCommand: @Sendable (Handler, CommandPayload, CommandContext) async throws -> CommandOutput
    var maxConcurrency: Int? { handler.maxConcurrency }
    var isJournaled: Bool { handler.isJournaled }

    func inverse(_ prepared: CommandPayload, commandName: String) throws(CommandBusError) -> (name: String, payload: Data)? {
        guard let reversible = try prepared.command(as: Handler.HandledCommand.self) as? any Reversible else { return nil }
        return try reversible.encodedInverse()
    }

    func prepare(_ payload: CommandPayload, commandName: String) throws(CommandBusError) -> CommandPayload {
        if case .typed(let typed) = payload, holds(typed.command, exactly: Handler.HandledCommand.self) { return payload }
        return .typed(try payload.command(as: Handler.HandledCommand.self))
    }

    func canHandle(_ prepared: CommandPayload, commandName: String) throws(CommandBusError) -> Bool {
        try canHandleCommand(handler, prepared)
    }

    func wouldHandle(_ prepared: CommandPayload, commandName: String) async throws(CommandBusError) -> Bool {
        try canHandle(prepared, commandName: commandName)
    }

    // Inlined into the protocol's witness, so a command's handling is one async frame, not two.
    @inline(__always)
    nonisolated(nonsending) func handle(_ prepared: CommandPayload, context: CommandContext) async throws -> CommandOutput {
        try await handleCommand(handler, prepared, context)
    }
}

/// Wraps a ``DynamicCommandHandler``.
struct DynamicHandlerBox: HandlerBox {
    let handler: any DynamicCommandHandler
    var maxConcurrency: Int? { handler.maxConcurrency }
    var isJournaled: Bool { handler.isJournaled }

    func inverse(_ prepared: CommandPayload, commandName: String) throws(CommandBusError) -> (name: String, payload: Data)? {
        do {
            return try handler.inverse(of: try prepared.jsonData(commandName: commandName))
        } catch let error as CommandBusError {
            throw error
        } catch {
            throw .decodingFailed(commandName, cause: error)
        }
    }

    func prepare(_ payload: CommandPayload, commandName: String) throws(CommandBusError) -> CommandPayload {
        .json(try payload.jsonData(commandName: commandName))
    }

    func canHandle(_ prepared: CommandPayload, commandName: String) throws(CommandBusError) -> Bool {
        do {
            return try handler.canHandle(payload: try prepared.jsonData(commandName: commandName))
        } catch let error as CommandBusError {
            throw error
        } catch {
            throw .decodingFailed(commandName, cause: error)
        }
    }

    func wouldHandle(_ prepared: CommandPayload, commandName: String) async throws(CommandBusError) -> Bool {
        do {
            return try await handler.wouldHandle(payload: try prepared.jsonData(commandName: commandName))
        } catch let error as CommandBusError {
            throw error
        } catch {
            throw .decodingFailed(commandName, cause: error)
        }
    }

    nonisolated(nonsending) func handle(_ prepared: CommandPayload, context: CommandContext) async throws -> CommandOutput {
        let data = try prepared.jsonData(commandName: context.envelope.commandName)
        return CommandOutput(json: try await handler.handle(payload: data, context: context))
    }
}
