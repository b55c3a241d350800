#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A command as the bus carries it: a Swift value, or JSON bytes from the dynamic path.
@usableFromInline
enum CommandPayload: Sendable {
    case typed(TypedCommand)
    case json(Data)

    /// `command` as a typed payload.
    @inlinable
    static func typed(_ command: some Command) -> CommandPayload {
        .typed(TypedCommand(command))
    }

    /// The payload as JSON bytes, encoding a typed command if needed.
    func jsonData(commandName: String) throws(CommandBusError) -> Data {
        switch self {
        case .json(let data):
            return data
        case .typed(let typed):
            do { return try JSONWire.encode(typed.command) } catch {
                throw .encodingFailed(commandName, cause: error)
            }
        }
    }

    /// The payload as a `C`, decoding JSON or re-coding a command of another Swift type if needed.
    @inlinable
    func command<C: Command>(as type: C.Type) throws(CommandBusError) -> C {
        // The common case, the exact type, asks the runtime for no metadata (not even `Optional<C>`):
        // the rest lives in a function of its own.
        if case .typed(let typed) = self, holds(typed.command, exactly: C.self) { return reinterpret(typed.command, as: C.self) }
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
        case .typed(let typed):
            if let command = typed.command as? C { return command }
            data = try jsonData(commandName: C.name)
        }
        do { return try JSONWire.decode(C.self, from: data) } catch {
            throw .decodingFailed(C.name, cause: error)
        }
    }
}

/// A typed command, held once: a payload moves from the router to a handler's box to the
/// handler, and copying it copies a reference. Held inline, each copy of the `any Command` went
/// through the existential's value witnesses, about five a send.
@usableFromInline
final class TypedCommand: Sendable {
    @usableFromInline let command: any Command

    @inlinable
    init(_ command: some Command) {
        self.command = command
    }
}
