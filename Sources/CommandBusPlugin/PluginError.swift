import CCommandBusABI

/// An error that crosses the plugin boundary: an ABI status and a message.
///
/// Subcommands that fail throw it into the handler; a handler may throw it to choose the status the host sees.
public struct PluginError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is, as the ABI names it.
    public struct Status: Hashable, Sendable {
        /// The raw `cmdbus_status` value.
        public let rawValue: Int32
        /// Wraps a raw `cmdbus_status` value.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// The handler failed.
        public static let failed = Status(rawValue: Int32(CMDBUS_FAILED.rawValue))
        /// The handler failed, and trying again may succeed.
        public static let retryable = Status(rawValue: Int32(CMDBUS_FAILED_RETRYABLE.rawValue))
        /// A payload did not decode.
        public static let decodingFailed = Status(rawValue: Int32(CMDBUS_DECODING_FAILED.rawValue))
        /// The command was cancelled.
        public static let cancelled = Status(rawValue: Int32(CMDBUS_CANCELLED.rawValue))
        /// No handler would take a subcommand.
        public static let noHandler = Status(rawValue: Int32(CMDBUS_NO_HANDLER.rawValue))
        /// A subcommand timed out.
        public static let timedOut = Status(rawValue: Int32(CMDBUS_TIMED_OUT.rawValue))
        /// The handler's `canHandle` said no when it was called to handle (the host passes the command on).
        public static let declined = Status(rawValue: Int32(CMDBUS_DECLINED.rawValue))
    }

    /// The status the host sees.
    public let status: Status
    /// A one-line message naming the thing and the cause.
    public let message: String

    /// Creates an error with a status and a message.
    public init(_ status: Status, _ message: String) {
        self.status = status
        self.message = message
    }

    /// The message.
    public var description: String { message }
}

/// An error a plugin handler throws to say that trying again may succeed.
public protocol RetryablePluginError: Error {}
