#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The one error type the bus throws: a stable ``code``, a message a person can act on, and the underlying cause.
///
/// Compare errors by code: `error.code == .noHandler`. The message names the command
/// (and, where there is one, the plugin or file) and says what to do next.
public struct CommandBusError: Error, Sendable, CustomStringConvertible {
    /// A stable, machine-readable error code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String, Hashable, Sendable {
            case noHandler, handlerFailed, decodingFailed, encodingFailed, cancelled, timedOut
            case childFailed, payloadTooLarge, journalFailed, tooDeep
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// No registered handler would take the command.
        public static let noHandler = Code(.noHandler)
        /// The handler threw; the cause holds what it threw.
        public static let handlerFailed = Code(.handlerFailed)
        /// The payload is not JSON, or does not decode into the command.
        public static let decodingFailed = Code(.decodingFailed)
        /// A command or result could not be encoded to JSON.
        public static let encodingFailed = Code(.encodingFailed)
        /// The command was cancelled before it finished.
        public static let cancelled = Code(.cancelled)
        /// The command did not finish before its deadline.
        public static let timedOut = Code(.timedOut)
        /// A subcommand failed and its parent did not handle the failure.
        public static let childFailed = Code(.childFailed)
        /// A payload is larger than the configured limit.
        public static let payloadTooLarge = Code(.payloadTooLarge)
        /// The journal could not be read or written.
        public static let journalFailed = Code(.journalFailed)
        /// A subcommand would be deeper below its root than ``CommandBusConfiguration/maxSubcommandDepth``.
        public static let tooDeep = Code(.tooDeep)

        /// The code's stable name, such as `noHandler`.
        public var description: String { value.rawValue }

        /// Looks a code up by its stable name.
        public init?(name: String) {
            guard let value = Value(rawValue: name) else { return nil }
            self.value = value
        }
    }

    /// The fields, behind one reference: an error sits in every failed command's outcome, which
    /// its context keeps as long as its ticket, and a reference there is 8 bytes where the fields
    /// were 57.
    private final class Storage: Sendable {
        let code: Code
        let message: String
        let cause: (any Error)?
        let isRetryable: Bool
        let fileID: String
        let line: Int

        init(code: Code, message: String, cause: (any Error)?, isRetryable: Bool, fileID: String, line: Int) {
            self.code = code
            self.message = message
            self.cause = cause
            self.isRetryable = isRetryable
            self.fileID = fileID
            self.line = line
        }
    }
    private let storage: Storage

    /// The stable code.
    public var code: Code { storage.code }
    /// A one-line message that names the thing and the cause.
    public var message: String { storage.message }
    /// The underlying error, if any.
    public var cause: (any Error)? { storage.cause }
    /// Whether a retry could succeed (set for handler errors marked ``RetryableError``).
    public var isRetryable: Bool { storage.isRetryable }
    /// Where the error was created.
    public var fileID: String { storage.fileID }
    /// The line where the error was created.
    public var line: Int { storage.line }

    /// Creates an error; prefer the static factories.
    public init(
        code: Code, message: String, cause: (any Error)? = nil, isRetryable: Bool = false,
        fileID: String = #fileID, line: Int = #line
    ) {
        storage = Storage(code: code, message: message, cause: cause, isRetryable: isRetryable, fileID: fileID, line: line)
    }

    /// The message, prefixed by the code: `noHandler: no handler would take 'greet'`.
    public var description: String { "\(code): \(message)" }
}

extension CommandBusError: Equatable {
    /// Errors are equal when their codes are.
    public static func == (lhs: CommandBusError, rhs: CommandBusError) -> Bool { lhs.code == rhs.code }
}

extension CommandBusError {
    /// No handler is registered for `command`, or none would take it now.
    public static func noHandler(_ command: String, registered: Int = 0, fileID: String = #fileID, line: Int = #line) -> Self {
        let detail = switch registered {
        case 0: "no handler is registered for it"
        case 1: "1 handler is registered but would not take it now"
        default: "\(registered) handlers are registered but none would take it now"
        }
        // A name sent by a client can be of any length: a long one is cut, saying how long it was.
        let shown = command.utf8.count <= 255 ? command : "\(command.prefix(64))… (\(command.utf8.count) bytes)"
        return .init(code: .noHandler, message: "no handler for command '\(shown)': \(detail)", fileID: fileID, line: line)
    }

    /// The handler for `command` threw `cause`.
    public static func handlerFailed(_ command: String, cause: any Error, fileID: String = #fileID, line: Int = #line) -> Self {
        let retryable = (cause as? any RetryableError)?.isRetryable ?? false
        return .init(
            code: .handlerFailed, message: "command '\(command)' failed: \(describe(cause))",
            cause: cause, isRetryable: retryable, fileID: fileID, line: line
        )
    }

    /// The payload for `command` did not decode; the message names the field where it can.
    public static func decodingFailed(_ command: String, cause: any Error, fileID: String = #fileID, line: Int = #line) -> Self {
        .init(
            code: .decodingFailed, message: "payload for '\(command)' does not decode: \(describeDecoding(cause))",
            cause: cause, fileID: fileID, line: line
        )
    }

    /// A value for `command` could not be encoded.
    public static func encodingFailed(_ command: String, cause: any Error, fileID: String = #fileID, line: Int = #line) -> Self {
        .init(code: .encodingFailed, message: "could not encode for '\(command)': \(describe(cause))", cause: cause, fileID: fileID, line: line)
    }

    /// `command` was cancelled.
    public static func cancelled(_ command: String, fileID: String = #fileID, line: Int = #line) -> Self {
        .init(code: .cancelled, message: "command '\(command)' was cancelled", fileID: fileID, line: line)
    }

    /// `command` ran past its deadline.
    public static func timedOut(_ command: String, after timeout: Duration, fileID: String = #fileID, line: Int = #line) -> Self {
        .init(code: .timedOut, message: "command '\(command)' timed out after \(timeout.spoken)", fileID: fileID, line: line)
    }

    /// The text for an arbitrary error: its own message for a bus error, else its description.
    static func describe(_ error: any Error) -> String {
        if let busError = error as? CommandBusError { return busError.message }
        return String(describing: error)
    }

    /// A one-line account of a `DecodingError` that names the field.
    static func describeDecoding(_ error: any Error) -> String {
        describeDecodingFailure(error)
    }
}

/// An error a handler throws to say that trying again may succeed (a network blip, a busy lock).
///
/// ``RetryMiddleware`` retries only errors that are retryable.
/// ```swift
/// struct ServiceUnavailable: RetryableError {}
/// ```
public protocol RetryableError: Error {
    /// Whether this particular error is worth retrying; `true` by default.
    var isRetryable: Bool { get }
}

extension RetryableError {
    /// Errors that adopt ``RetryableError`` are retryable unless they say otherwise.
    public var isRetryable: Bool { true }
}
