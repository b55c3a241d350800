#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A command's result as the bus carries it: a Swift value from a typed handler, or JSON bytes from a dynamic one.
///
/// Middleware returns one of these to short-circuit a command; the bus converts it
/// to whatever form the sender asked for.
public struct CommandOutput: Sendable {
    @usableFromInline
    enum Storage: Sendable {
        case value(any Encodable & Sendable)
        case json(Data)
    }
    @usableFromInline let storage: Storage

    /// A result held as a Swift value.
    public init(_ value: some Encodable & Sendable) {
        storage = .value(value)
    }

    /// A result held as JSON bytes.
    public init(json: Data) {
        storage = .json(json)
    }

    /// The result as JSON bytes.
    /// - Parameter commandName: The command the result belongs to, named in any error.
    public func jsonData(commandName: String) throws(CommandBusError) -> Data {
        switch storage {
        case .json(let data):
            return data
        case .value(let value):
            do { return try JSONWire.encode(value) } catch {
                throw .encodingFailed(commandName, cause: error)
            }
        }
    }

    /// The result as a `R`, cast directly or decoded from JSON.
    /// - Parameter commandName: The command the result belongs to, named in any error.
    @inlinable
    public func value<R: Decodable>(as type: R.Type, commandName: String) throws(CommandBusError) -> R {
        // The exact type asks the runtime for no metadata; the rest lives in a function of its own.
        // `@inlinable`, as a typed `send` is: the sender's module specializes it for `R`.
        if case .value(let value) = storage, holds(value, exactly: R.self) { return reinterpret(value, as: R.self) }
        return try converted(as: R.self, commandName: commandName)
    }

    @usableFromInline @inline(never)
    func converted<R: Decodable>(as type: R.Type, commandName: String) throws(CommandBusError) -> R {
        if case .value(let value) = storage, let typed = value as? R { return typed }
        let data = try jsonData(commandName: commandName)
        do { return try JSONWire.decode(R.self, from: data) } catch {
            throw CommandBusError(
                code: .decodingFailed,
                message: "result of '\(commandName)' does not decode as \(R.self): \(CommandBusError.describeDecoding(error))",
                cause: error
            )
        }
    }
}
