#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A command as the bus carries it: a Swift value, or JSON bytes from the dynamic path.
@usableFromInline
enum CommandPayload: Sendable {
    case typed(any Command)
    case json(Data)

    /// The payload as JSON bytes, encoding a typed command if needed.
    func jsonData(commandName: String) throws(CommandBusError) -> Data {
        switch self {
        case .json(let data):
            return data
        case .typed(let command):
            do { return try JSONWire.encode(command) } catch {
                throw .encodingFailed(commandName, cause: error)
            }
        }
    }

    /// The payload as a `C`, decoding JSON or re-coding a command of another Swift type if needed.
    @inlinable
    func command<C: Command>(as type: C.Type) throws(CommandBusError) -> C {
        // The common case, the exact type, asks the runtime for no metadata (not even `Optional<C>`):
        // the rest lives in a function of its own.
        if case .typed(let command) = self, holds(command, exactly: C.self) { return reinterpret(command, as: C.self) }
        return try converted(as: C.self)
    }

    /// JSON bytes are decoded without first asking whether they are a `C` (`as? C` makes a
    /// `C?`, whose metadata a handler's box, generic over its command, looks up on every call).
    @usableFromInline @inline(never)
    func converted<C: Command>(as type: C.Type) throws(CommandBusError) -> C {
        let data: Data
        switch self {
        case .json(let bytes):
            data = bytes
        case .typed(let command):
            if let typed = command as? C { return typed }
            data = try jsonData(commandName: C.name)
        }
        do { return try JSONWire.decode(C.self, from: data) } catch {
            throw .decodingFailed(C.name, cause: error)
        }
    }
}
