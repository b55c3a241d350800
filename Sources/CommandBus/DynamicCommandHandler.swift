#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Handles a command by name, with the command and its result as JSON bytes.
///
/// This is how handlers that are not Swift types in this process (plugins, remote
/// workers) join the bus. Typed ``CommandBus/send(_:metadata:timeout:)`` calls reach
/// them too: the bus encodes the command and decodes the result.
///
/// ```swift
/// struct EchoHandler: DynamicCommandHandler {
///     let commandName = "echo"
///     func handle(payload: Data, context: CommandContext) async throws -> Data { payload }
/// }
/// ```
public protocol DynamicCommandHandler: Sendable {
    /// The routing name of the command this handler takes.
    var commandName: String { get }

    /// How many commands may run at once; `nil` (the default) means no limit.
    var maxConcurrency: Int? { get }

    /// Whether a bus with a journal writes these commands to it; `false` for queries.
    var isJournaled: Bool { get }

    /// The command that undoes the one with this payload, or `nil` if it has no inverse.
    func inverse(of payload: Data) throws -> (name: String, payload: Data)?

    /// Whether the handler would take the command with this payload now.
    /// - Throws: ``CommandBusError`` with code `decodingFailed` if the payload is malformed.
    func canHandle(payload: Data) throws -> Bool

    /// The handler's full answer to ``canHandle(payload:)``, for someone who asks without
    /// sending (``CommandBus/wouldHandle(name:payload:)``). A handler whose `canHandle` only
    /// says yes quickly and decides in `handle` (see ``HandlerDeclined``) asks for real here;
    /// by default this is `canHandle`.
    func wouldHandle(payload: Data) async throws -> Bool

    /// Does the work for the JSON `payload` and returns the JSON result.
    func handle(payload: Data, context: CommandContext) async throws -> Data
}

extension DynamicCommandHandler {
    /// No limit by default.
    public var maxConcurrency: Int? { nil }

    /// Journaled by default.
    public var isJournaled: Bool { true }

    /// No inverse by default.
    public func inverse(of payload: Data) throws -> (name: String, payload: Data)? { nil }

    /// Takes every payload by default.
    public func canHandle(payload: Data) throws -> Bool { true }

    /// `canHandle`, by default.
    public func wouldHandle(payload: Data) async throws -> Bool { try canHandle(payload: payload) }
}
